"""The test servers of team mode: PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379.

A test gets a database of its own (`pg_database()`: created empty, dropped afterwards with
every connection to it), never touching a database it did not create. Without a server the
test is skipped, saying why; with AOKUN_REQUIRE_SERVERS=1 (CI) it fails instead, so a green
CI always means these tests ran.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from bench_servers import PG_BIN, OwnPostgres, own_postgres_server

PG_SERVER = os.environ.get("AOKUN_TEST_PG", "postgresql://postgres@127.0.0.1:5432")
REDIS_URL = "redis://127.0.0.1:6379/0"


def missing_server(why: str) -> None:
    """Skip (or, with AOKUN_REQUIRE_SERVERS=1, fail) a test whose server is not there."""
    if os.environ.get("AOKUN_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{why}; AOKUN_REQUIRE_SERVERS=1 requires one")
    pytest.skip(f"{why}; start one (or set AOKUN_REQUIRE_SERVERS=1 to fail instead)")


def _admin():
    import psycopg

    try:
        return psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        missing_server(f"no PostgreSQL server at {PG_SERVER} ({str(exc).strip().splitlines()[0]})")


@contextmanager
def pg_database(prefix: str = "aokun_test") -> Iterator[str]:
    """The URL of a new, empty database of this test's own; dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:16]}"
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        with _admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for one test (its URL)."""
    with pg_database() as url:
        yield url


# -- Redis ------------------------------------------------------------------------------------

def redis_client():
    """A client on the test Redis server, or a skip (a failure with AOKUN_REQUIRE_SERVERS=1)."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        missing_server(f"no Redis server at {REDIS_URL} ({exc})")
    return client


def queue_keys(client, name: str) -> list[bytes]:
    """Every key of queue `name` (huey.redis.<name>, huey.schedule.<name>, ...)."""
    return [key for key in client.scan_iter(match=f"huey.*.{name}*")
            if key.decode().split(".", 2)[2].split(".")[0] == name]


@contextmanager
def redis_queue_name() -> Iterator[tuple]:
    """(client, a queue name of this test's own); its keys are deleted afterwards, only those."""
    client = redis_client()
    name = f"aokun_test_{uuid.uuid4().hex}"
    try:
        yield client, name
    finally:
        keys = queue_keys(client, name)
        if keys:
            client.delete(*keys)
        client.close()


# -- a PostgreSQL server of a test's own (to restart it): scripts/bench_servers.py ---------------

@contextmanager
def own_postgres(folder: Path, port: int) -> Iterator[OwnPostgres]:
    """A PostgreSQL server of this test's own, started; stopped at the end."""
    if not OwnPostgres.available():
        missing_server(f"no PostgreSQL programs in {PG_BIN} to start a server of this test's own")
    with own_postgres_server(folder, port) as server:
        yield server
