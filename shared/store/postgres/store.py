"""The PostgreSQL implementation of the store interface (shared/store/interface.py).

Sessions work as the SQLite store's do (shared/store/sqlite_store.py): an aggregate call goes
to a runner that supplies the connection — the transaction of read()/write(), or, on the
Store itself, one transaction per call (joining the thread's open transaction when there is
one). The aggregates are the SQLite store's bindings (shared/store/sqlite_repos.py) wherever
the module's SQL is portable, and this package's versions where PostgreSQL spells it
differently (shared/store/postgres/repos.py). psycopg errors leave every call as StorageError.
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import psycopg

from shared.config import StorageConfig
from shared.errors import StorageError
from shared.store.postgres import repos
from shared.store.postgres.connection import PgConnection, PgDatabase, where
from shared.store.postgres.schema import apply_migrations, is_created

T = TypeVar("T")
log = logging.getLogger("aokun.store")
# How long a process starting while the database is away waits for it before giving up.
START_WAIT_S = 30.0


class _Runner:
    """How an aggregate's call reaches a connection."""

    def __init__(self, db: PgDatabase):
        self.db = db

    def rows(self, fn: Callable[..., list], *args: Any) -> list:
        return list(self.read(fn, *args))

    def row(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.read(fn, *args)

    def _call(self, conn: PgConnection, fn: Callable[..., Any], args: tuple) -> Any:
        try:
            return fn(conn, *args)
        except psycopg.Error as exc:
            raise self.db.failure(exc) from exc

    def _iterate(self, conn: PgConnection, fn: Callable[..., Iterator], args: tuple) -> Iterator:
        try:
            yield from fn(conn, *args)
        except psycopg.Error as exc:
            raise self.db.failure(exc) from exc


class _InTransaction(_Runner):
    """Calls inside one read() or write() transaction."""

    def __init__(self, db: PgDatabase, conn: PgConnection, writable: bool):
        super().__init__(db)
        self.conn, self.writable = conn, writable

    def read(self, fn, *args):
        return self._call(self.conn, fn, args)

    def write(self, fn, *args):
        if not self.writable:
            raise StorageError("a read session cannot write (use store.write()); nothing was stored")
        return self._call(self.conn, fn, args)

    def iterate(self, fn, *args):
        return self._iterate(self.conn, fn, args)

    def whole(self, fn):
        return fn(_Joined(self.db, self.conn))


class _PerCall(_Runner):
    """Calls on the Store itself: one transaction each, or the thread's open one."""

    def read(self, fn, *args):
        conn = self.db.current()
        if conn is not None:
            return self._call(conn, fn, args)
        with self.db.snapshot() as conn:
            return fn(conn, *args)

    def write(self, fn, *args):
        conn = self.db.current()
        if conn is not None:
            return self._call(conn, fn, args)
        with self.db.write() as conn:
            return fn(conn, *args)

    def iterate(self, fn, *args):
        conn = self.db.current()
        if conn is not None:
            yield from self._iterate(conn, fn, args)
            return
        with self.db.snapshot() as conn:
            yield from fn(conn, *args)

    def whole(self, fn):
        conn = self.db.current()
        return fn(_Joined(self.db, conn)) if conn is not None else fn(self.db)


class _Joined:
    """A database face on a transaction already open, for functions that take the database
    and open a snapshot of their own (consistency.all_table_counts): they read inside it."""

    def __init__(self, db: PgDatabase, conn: PgConnection):
        self.db, self.conn = db, conn

    @contextmanager
    def snapshot(self) -> Iterator[PgConnection]:
        try:
            yield self.conn
        except psycopg.Error as exc:
            raise self.db.failure(exc) from exc


class PostgresSession(repos.Aggregates):
    """Every aggregate, bound to one runner."""

    def __init__(self, run: _Runner):
        super().__init__(run)
        self._run = run

    def _conn(self) -> PgConnection | None:
        run = self._run
        return run.conn if isinstance(run, _InTransaction) else run.db.current()

    @contextmanager
    def savepoint(self, name: str) -> Iterator[None]:
        conn = self._conn()
        if conn is None or (isinstance(self._run, _InTransaction) and not self._run.writable):
            raise StorageError("a savepoint needs a write transaction (store.write())")
        try:
            conn.sql(f"SAVEPOINT {name}")
        except psycopg.Error as exc:
            raise self._run.db.failure(exc) from exc
        try:
            yield
        except BaseException:
            try:
                conn.sql(f"ROLLBACK TO SAVEPOINT {name}")
                conn.sql(f"RELEASE SAVEPOINT {name}")
            except psycopg.Error:
                pass  # the transaction is lost: transaction_alive() says so
            raise
        try:
            conn.sql(f"RELEASE SAVEPOINT {name}")
        except psycopg.Error as exc:
            raise self._run.db.failure(exc) from exc

    def transaction_alive(self) -> bool:
        conn = self._conn()
        return conn is not None and conn.in_transaction and not conn.failed


class PostgresStore(PostgresSession):
    """The store on one PostgreSQL database, shared by fronts and workers on many hosts."""

    engine = "postgresql"

    def __init__(self, db: PgDatabase, cache_dir: Path):
        super().__init__(_PerCall(db))
        self.db = db  # the implementation's own; layers above use the interface only
        self.location = db.location
        self.cache_dir = cache_dir

    @contextmanager
    def read(self) -> Iterator[PostgresSession]:
        joined = self.db.current()
        if joined is not None:  # inside reading() (or a write): the thread's transaction
            yield PostgresSession(_InTransaction(self.db, joined, writable=False))
            return
        with self.db.snapshot() as conn:
            yield PostgresSession(_InTransaction(self.db, conn, writable=False))

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One snapshot for the thread's calls in the block: a recall's channel makes dozens of
        small reads, and each per-call transaction costs BEGIN, COMMIT and a connection check."""
        if self.db.current() is not None:
            yield
            return
        with self.db.snapshot():
            yield

    @contextmanager
    def write(self) -> Iterator[PostgresSession]:
        with self.db.write() as conn:
            try:
                yield PostgresSession(_InTransaction(self.db, conn, writable=True))
            except StorageError as exc:
                # A failed statement: the transaction rolls back and words it from the original.
                if isinstance(exc.__cause__, psycopg.Error):
                    raise exc.__cause__
                raise

    def incarnation(self) -> int:
        """The database's number for what it holds: a restore writes a new one."""
        try:
            with self.db.snapshot() as conn:
                return int(conn.sql("SELECT value FROM store_incarnation").fetchone()[0])
        except (StorageError, psycopg.Error, TypeError):
            return 0

    def flush_deleted(self) -> bool:
        return repos.vacuum_deleted(self.db)

    def backup(self, directory: Path, now: float, reason: str) -> Path:
        # Lazy imports: pg_dump's runner loads only when a backup is made.
        from shared.store.postgres.backup import dump_database

        return dump_database(self.db, directory, now, reason)

    def close(self) -> None:
        self.db.close()


def password_of(storage: StorageConfig) -> str:
    return os.environ.get(storage.password_env, "") if storage.password_env else ""


def open_postgres_store(storage: StorageConfig, *, migrate: bool = True) -> PostgresStore:
    """The store at storage.url; data_dir holds only this process's caches. migrate=False
    opens an existing store as it is and refuses a database that holds none."""
    db = PgDatabase(storage.url, password_of(storage), storage.pool_size, storage.busy_timeout_ms)
    try:
        _until_reachable(lambda: _probe(storage))
        if migrate:
            _until_reachable(lambda: apply_migrations(db))
        elif not _until_reachable(lambda: is_created(db)):
            raise StorageError(f"no memory store in the PostgreSQL database {db.location} "
                               "(check storage.url)", kind="cannot_open")
    except BaseException:
        db.close()
        raise
    cache_dir = Path(storage.data_dir)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        db.close()
        raise StorageError(f"cannot create data_dir {cache_dir} (this process's caches): {exc.strerror}",
                           kind="read_only") from exc
    return PostgresStore(db, cache_dir)


# What libpq says when the server answers but the URL or credentials are wrong: retrying
# cannot help, so it is said at once.
_WRONG_SETTINGS = ("does not exist", "authentication failed", "no password supplied",
                   "password authentication", "is not permitted to log in")


def _probe(storage: StorageConfig) -> None:
    """One direct connection, for libpq's own words: the pool would only say it timed out."""
    password = password_of(storage)
    try:
        psycopg.connect(storage.url, connect_timeout=5, **({"password": password} if password else {})).close()
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1].strip()
        wrong = any(words in first for words in _WRONG_SETTINGS)
        raise StorageError(f"cannot open the PostgreSQL database {where(storage.url)}: {first}"
                           + ("; check storage.url and the password" if wrong else ""),
                           kind="other" if wrong else "cannot_open") from exc


def _until_reachable(step: Callable[[], T]) -> T:
    """step(), retried while the server is away (a restart, a failover), up to START_WAIT_S:
    a front or worker starting during a database restart waits for it instead of exiting."""
    deadline = time.monotonic() + START_WAIT_S
    while True:
        try:
            return step()
        except StorageError as exc:
            if exc.kind != "cannot_open" or time.monotonic() > deadline:
                raise
            log.warning("%s; trying again for up to %.0f s", exc, deadline - time.monotonic())
            time.sleep(1.0)
