"""The test servers of team mode: PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379.

A test gets a database of its own (`pg_database()`: created empty, dropped afterwards with
every connection to it), never touching a database it did not create. Without a server the
test is skipped, saying why; with AOKUN_REQUIRE_SERVERS=1 (CI) it fails instead, so a green
CI always means these tests ran.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

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


# -- a PostgreSQL server of a test's own (to restart it) ----------------------------------------

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _as_postgres_user(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root (CI), run its programs as `postgres`."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


class OwnPostgres:
    """initdb'd in a folder of the test's, on a port of its own, trust authentication."""

    def __init__(self, folder: Path, port: int):
        self.folder, self.port = folder, port
        self.data = folder / "pgdata"
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def init(self) -> None:
        if not (PG_BIN / "initdb").exists():
            missing_server(f"no PostgreSQL programs in {PG_BIN} to start a server of this test's own")
        self.folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", "postgres", str(self.folder)], check=True)
            self.folder.chmod(0o755)
            for parent in self.folder.parents:  # the postgres user must reach the folder
                if parent == Path("/"):
                    break
                parent.chmod(parent.stat().st_mode | 0o005)
        subprocess.run(_as_postgres_user([str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
                                          "--auth=trust", "--no-sync", "-E", "UTF8"]),
                       check=True, capture_output=True)

    def start(self) -> None:
        subprocess.run(_as_postgres_user([
            str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-l", str(self.folder / "pg.log"),
            "-o", f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start"]), check=True, capture_output=True)

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(_as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "-m", mode,
                                          "stop"]), capture_output=True)


@contextmanager
def own_postgres(folder: Path, port: int) -> Iterator[OwnPostgres]:
    """A PostgreSQL server of this test's own, started; stopped (and its folder left to
    pytest's tmp_path) at the end."""
    server = OwnPostgres(folder, port)
    server.init()
    server.start()
    try:
        yield server
    finally:
        server.stop("immediate")
