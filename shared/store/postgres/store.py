"""The PostgreSQL implementation of the store interface (shared/store/interface.py).

Sessions work as the SQLite store's do, through the same runners (shared/store/runners.py):
an aggregate call goes to a runner that supplies the connection — the transaction of
read()/write(), or, on the Store itself, one transaction per call (joining the thread's open
transaction when there is one). The aggregates are the portable ones
(shared/store/portable/aggregates.py) with this package's versions where PostgreSQL spells
the SQL its own way (shared/store/postgres/aggregates.py). psycopg errors leave every call as
StorageError.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from shared.config import StorageConfig
from shared.errors import StorageError
from shared.platform import private_folder
from shared.store.postgres import aggregates
from shared.store.postgres.clients import password_of
from shared.store.postgres.connection import PgDatabase, where
from shared.store.postgres.schema import apply_migrations, is_created
from shared.store.runners import InTransaction, PerCall, Runner, Session, write_session

T = TypeVar("T")
log = logging.getLogger("aokun.store")
# How long a process starting while the database is away waits for it before giving up.
START_WAIT_S = 30.0


class PostgresSession(aggregates.Aggregates, Session):
    """Every aggregate, bound to one runner."""

    def __init__(self, run: Runner):
        Session.__init__(self, run)
        aggregates.Aggregates.__init__(self, run)


class PostgresStore(PostgresSession):
    """The store on one PostgreSQL database, shared by fronts and workers on many hosts."""

    engine = "postgresql"

    def __init__(self, db: PgDatabase, cache_dir: Path):
        super().__init__(PerCall(db))
        self.db = db  # the implementation's own; layers above use the interface only
        self.location = db.location
        self.cache_dir = cache_dir

    @contextmanager
    def read(self) -> Generator[PostgresSession, None, None]:
        joined = self.db.current()
        if joined is not None:  # inside reading() (or a write): the thread's transaction
            yield PostgresSession(InTransaction(self.db, joined, writable=False))
            return
        with self.db.snapshot() as conn:
            yield PostgresSession(InTransaction(self.db, conn, writable=False))

    @contextmanager
    def reading(self) -> Generator[None, None, None]:
        """One snapshot for the thread's calls in the block: a recall's channel makes dozens of
        small reads, and each per-call transaction costs BEGIN, COMMIT and a connection check."""
        if self.db.current() is not None:
            yield
            return
        with self.db.snapshot():
            yield

    def write(self) -> AbstractContextManager[PostgresSession]:
        return write_session(self.db, PostgresSession)

    def incarnation(self) -> int:
        """The database's number for what it holds: a restore writes a new one."""
        try:
            with self.db.snapshot() as conn:
                row = conn.sql("SELECT value FROM store_incarnation").fetchone()
                return int(row[0]) if row is not None else 0
        except (StorageError, psycopg.Error, TypeError):
            return 0

    def flush_deleted(self) -> bool:
        return aggregates.vacuum_deleted(self.db)

    def refresh_statistics(self) -> bool:
        return aggregates.vacuum_analyze(self.db)

    def backup(self, directory: Path, now: float, reason: str) -> Path:
        # Lazy imports: pg_dump's runner loads only when a backup is made.
        from shared.store.postgres.backup import dump_database

        return dump_database(self.db, directory, now, reason)

    def close(self) -> None:
        self.db.close()


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
        private_folder(cache_dir)
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
        extra: dict[str, Any] = {"password": password} if password else {}
        psycopg.connect(storage.url, connect_timeout=5, **extra).close()
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
