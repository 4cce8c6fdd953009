"""The test servers of team mode: PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379.

A test gets a database of its own: `pg_database()` empty, `pg_store_database()` holding an
empty store; the test process drops them with every connection to them (_Databases). A test
never touches a database it did not create. Without a server the test is skipped, saying why;
with AOKUN_REQUIRE_SERVERS=1 (CI) it fails instead, so a green CI always means these tests ran.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
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


def _create(template: str = "template1") -> str:
    name = f"aokun_test_{uuid.uuid4().hex[:16]}"
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name


def _drop(name: str) -> None:
    with _admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# What a database's schema is: its store's tables, columns, indexes, constraints, triggers
# and functions. A store database whose schema a test changed is dropped, not used again.
_SCHEMA = """
SELECT md5(string_agg(part, ',' ORDER BY part)) FROM (
    SELECT relname || ':' || relkind::text FROM pg_class WHERE relnamespace = 'public'::regnamespace
    UNION ALL SELECT attrelid::regclass || '.' || attname || ':' || format_type(atttypid, atttypmod)
        || ':' || attnotnull FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        WHERE c.relnamespace = 'public'::regnamespace AND attnum > 0 AND NOT attisdropped
    UNION ALL SELECT conname || pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = 'public'::regnamespace
    UNION ALL SELECT pg_get_indexdef(indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
        WHERE c.relnamespace = 'public'::regnamespace
    UNION ALL SELECT tgname || pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = 'public'::regnamespace
    UNION ALL SELECT proname || prosrc FROM pg_proc WHERE pronamespace = 'public'::regnamespace
    UNION ALL SELECT nspname FROM pg_namespace
) AS schema (part)
"""
_TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"


class _StoreTemplate:
    """A database holding an empty store, as open_store leaves a new database: its schema and
    the rows the migrations wrote (their record, the store's incarnation)."""

    def __init__(self, name: str) -> None:
        # Lazy imports: psycopg and the store's PostgreSQL engine load only in tests using them.
        import psycopg

        from shared.config import StorageConfig
        from shared.store import open_store

        self.name = name
        with tempfile.TemporaryDirectory() as caches:
            # Closed at once: PostgreSQL copies only a template nobody is connected to.
            open_store(StorageConfig(backend="postgresql", url=f"{PG_SERVER}/{self.name}",
                                     data_dir=Path(caches))).close()
        with psycopg.connect(f"{PG_SERVER}/{self.name}", autocommit=True) as conn:
            self.schema = conn.execute(_SCHEMA).fetchone()[0]
            self.tables = [table for (table,) in conn.execute(_TABLES)]
            self.sequences = [name for (name,) in conn.execute(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'")]
            self.rows = {table: conn.execute(f'SELECT * FROM "{table}"').fetchall()
                         for table in self.tables if table != "store_incarnation"}

    def reset(self, name: str) -> bool:
        """Make database `name`, a copy of this template a test used, an empty store again
        (its rows deleted and its sequences restarted, the migrations' rows back, no
        planner statistics, a new incarnation); False, leaving it as it is, when the test
        changed its schema."""
        import psycopg

        with psycopg.connect(f"{PG_SERVER}/{name}", autocommit=True) as conn, conn.transaction():
            conn.execute("SET LOCAL lock_timeout = '5s'")
            if conn.execute(_SCHEMA).fetchone()[0] != self.schema:
                return False
            # DELETE, not TRUNCATE (a new file per table: ~0.3 s), with the foreign keys' triggers
            # off for this transaction (the tables empty together); sequences restarted.
            conn.execute("SET LOCAL session_replication_role = replica")
            for table in self.tables:
                conn.execute(f'DELETE FROM "{table}"')
            for sequence in self.sequences:
                conn.execute(f'ALTER SEQUENCE "{sequence}" RESTART')
            conn.execute("SET LOCAL session_replication_role = DEFAULT")
            for table, rows in self.rows.items():
                if rows:
                    marks = ", ".join(["%s"] * len(rows[0]))
                    conn.cursor().executemany(f'INSERT INTO "{table}" VALUES ({marks})', rows)
            conn.execute("INSERT INTO store_incarnation (value)"
                         " VALUES ((random() * 4503599627370495)::BIGINT + 1)")
            conn.execute("DELETE FROM pg_statistic WHERE starelid IN"
                         " (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)")
        return True


class _Databases:
    """This test process's databases. Dropping a database costs seconds on a busy server (a
    checkpoint each) where emptying a store costs a fraction of one: a database holding a
    store is used again by the next test that wants one, emptied as a copy of the store's
    template (made once per process) would be; a database whose schema a test changed, and
    every empty one, is dropped when this process exits, with the rest."""

    def __init__(self) -> None:
        self._template: _StoreTemplate | None = None
        self._spare_stores: list[str] = []
        self._to_drop: list[str] = []
        atexit.register(self._close)

    def empty(self) -> str:
        return _create()

    def store(self) -> str:
        if self._spare_stores:
            return self._spare_stores.pop()
        if self._template is None:
            name = _create()
            self._to_drop.append(name)
            self._template = _StoreTemplate(name)
        return _create(self._template.name)

    def give_back_store(self, name: str) -> None:
        import psycopg

        assert self._template is not None
        try:
            clean = self._template.reset(name)
        except psycopg.Error:  # still locked by a process the test left: not used again
            clean = False
        (self._spare_stores if clean else self._to_drop).append(name)

    def drop(self, name: str) -> None:
        self._to_drop.append(name)

    def _close(self) -> None:
        for name in [*self._spare_stores, *reversed(self._to_drop)]:  # the template last
            _drop(name)


_databases = _Databases()


@contextmanager
def pg_database() -> Iterator[str]:
    """The URL of a new, empty database of this test's own; dropped afterwards."""
    name = _databases.empty()
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        _databases.drop(name)


@contextmanager
def pg_store_database() -> Iterator[str]:
    """The URL of a new database of this test's own holding an empty store, as open_store
    leaves a new database (its own store_incarnation); emptied or dropped afterwards."""
    name = _databases.store()
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        _databases.give_back_store(name)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (its URL)."""
    with pg_database() as url:
        yield url


@pytest.fixture
def pg_store_url() -> Iterator[str]:
    """A fresh PostgreSQL database holding an empty store, for one test (its URL)."""
    with pg_store_database() as url:
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
def own_postgres(log_folder: Path, port: int) -> Iterator[OwnPostgres]:
    """A PostgreSQL server of this test's own, started; stopped at the end, when its log is
    left in log_folder and its own folder removed. That folder is made here, outside pytest's:
    a pytest run starting meanwhile makes /tmp/pytest-of-<user> private again and prunes old
    runs' folders there, which would shut the `postgres` user out of a data directory inside."""
    if not OwnPostgres.available():
        missing_server(f"no PostgreSQL programs in {PG_BIN} to start a server of this test's own")
    folder = Path(tempfile.mkdtemp(prefix="aokun-test-pg-"))
    try:
        with own_postgres_server(folder, port) as server:
            yield server
    finally:
        log_folder.mkdir(parents=True, exist_ok=True)
        if (folder / "pg.log").exists():
            shutil.copyfile(folder / "pg.log", log_folder / "pg.log")
        # A server that could not be stopped keeps its folder (and says so in the error).
        if not (folder / "pgdata" / "postmaster.pid").exists():
            shutil.rmtree(folder)


@contextmanager
def storage_of(engine: str):
    """The storage section of a fresh store of the engine."""
    if engine == "sqlite":
        yield {"data_dir": "data"}
        return
    with pg_database() as url:
        yield {"backend": "postgresql", "url": url, "data_dir": "data"}
