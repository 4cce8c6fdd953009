"""The test servers of team mode: PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379.

A test gets a database of its own (`pg_database()`: created empty, dropped afterwards with
every connection to it), never touching a database it did not create. Without a server the
test is skipped, saying why; with AOKUN_REQUIRE_SERVERS=1 (CI) it fails instead, so a green
CI always means these tests ran.
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
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
