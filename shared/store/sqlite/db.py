"""SQLite access: WAL, busy_timeout, BEGIN IMMEDIATE writes, errors that say what to do, and a
small migrations table.

Every process (front, worker, admin CLI) opens the same database file. Each thread gets its
own connection, closed when its thread ends: the MCP SDK runs tools in a thread pool that
retires idle threads, and connections kept past their thread once leaked descriptors until
SQLite could open no file at all. Every write transaction starts with BEGIN IMMEDIATE because
a deferred transaction that later upgrades to a write fails with "database is locked" at once,
whatever busy_timeout says.

When SQLite cannot open the files read-write it silently opens them read-only, and such a
connection stays read-only after permissions return. So a connection opened while data_dir
looked unwritable, or one a write found read-only, is replaced by a fresh one before the next
write.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Generator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from shared.config import StorageConfig
from shared.errors import StorageError
from shared.platform import private_folder
from shared.sqlite_errors import BUSY, CANTOPEN, CORRUPT, FULL, IOERR, LOCKED, NOTADB, READONLY, primary_code
from shared.store.model.migration import Migration
from shared.store.model.record import Record
from shared.store.sqlite import fts

MIGRATIONS_DDL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_time REAL NOT NULL
)
"""

# Failures a fresh connection may not have: stale read-only, a replaced file, no descriptor
# left, an I/O error on a file handle.
_REOPEN_CODES = {READONLY, CANTOPEN, IOERR}


def _close_connection(conn: sqlite3.Connection, registry: set[sqlite3.Connection], lock: threading.RLock) -> None:
    with lock:
        registry.discard(conn)
    try:
        conn.close()
    except sqlite3.Error:
        pass


class _Slot:
    """One thread's connection. Only the thread-local refers to it, so it dies with its thread
    and its finalizer closes the connection; `read_only` marks a connection opened while the
    files looked unwritable."""

    __slots__ = ("__weakref__", "close", "conn", "read_only")


class Database:
    """One SQLite file shared by all processes; a connection per live thread. It is the
    runners' Engine (shared/store/runners.py)."""

    errors = sqlite3.Error

    def __init__(self, path: Path, busy_timeout_ms: int = 10_000, synchronous: str = "full"):
        self.path = Path(path)
        self._busy_timeout_ms = busy_timeout_ms
        self._synchronous = synchronous
        self._local = threading.local()
        self._open: set[sqlite3.Connection] = set()  # still-open connections, for close()
        # Reentrant: a finalizer may run in whichever thread drops the last reference.
        self._open_lock = threading.RLock()

    @classmethod
    def from_config(cls, storage: StorageConfig) -> Database:
        return cls(storage.db_path, storage.busy_timeout_ms, storage.synchronous)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use (autocommit; we BEGIN explicitly)."""
        return self._slot().conn

    def current(self) -> sqlite3.Connection | None:
        """This thread's connection if a transaction is open on it."""
        conn = self.connection()
        return conn if conn.in_transaction else None

    @staticmethod
    def records(rows: list[sqlite3.Row]) -> list[Record]:
        """sqlite3.Row results as engine-neutral Records."""
        if not rows:
            return []
        kind = Record.kind(tuple(rows[0].keys()))
        return [kind(row) for row in rows]

    @staticmethod
    def savepoint(conn: sqlite3.Connection, name: str) -> AbstractContextManager[sqlite3.Connection]:
        return savepoint(conn, name)

    @staticmethod
    def transaction_alive(conn: sqlite3.Connection) -> bool:
        return conn.in_transaction

    def _slot(self) -> _Slot:
        slot = getattr(self._local, "slot", None)
        if slot is None:
            self._make_data_dir()
            writable = self._looks_writable()
            conn = self._connect()
            slot = _Slot()
            slot.conn = conn
            # Checked before and after: only a change within the connect itself goes unseen.
            slot.read_only = not (writable and self._looks_writable())
            with self._open_lock:
                self._open.add(conn)
            slot.close = weakref.finalize(slot, _close_connection, conn, self._open, self._open_lock)
            slot.close.atexit = False  # at exit the OS closes it; a daemon thread may still use it
            self._local.slot = slot
        return slot

    def _reopen(self) -> sqlite3.Connection:
        """Close this thread's connection and open a new one."""
        self._drop(self._slot().conn)
        return self._slot().conn

    def _drop(self, conn: sqlite3.Connection) -> None:
        """Close `conn` if it is still this thread's connection; the next use opens another."""
        slot = getattr(self._local, "slot", None)
        if slot is not None and slot.conn is conn:
            self._local.slot = None
            slot.close()

    def _looks_writable(self) -> bool:
        """Whether SQLite could open the database files read-write right now."""
        files = [p for p in (Path(f"{self.path}{end}") for end in ("", "-wal", "-shm")) if p.exists()]
        if not files:
            return os.access(self.path.parent, os.W_OK)
        return all(os.access(p, os.W_OK) for p in files)

    def _make_data_dir(self) -> None:
        try:
            private_folder(self.path.parent)
        except OSError as exc:
            raise StorageError(f"cannot create data_dir {self.path.parent}: {exc.strerror}; create it "
                               "writable for this user or set storage.data_dir to a writable folder",
                               kind="read_only") from exc

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=self._busy_timeout_ms / 1000)
        except sqlite3.Error as exc:
            raise self.failure(exc) from exc
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            self._enable_wal(conn)
            conn.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
            conn.execute("PRAGMA foreign_keys = ON")
            fts.configure_connection(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise self.failure(exc) from exc
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        """Switch a new database to WAL. The switch needs an exclusive lock and does not wait
        on busy_timeout: two processes creating the same database at once would see
        "database is locked", so retry until the timeout."""
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        while True:
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @contextmanager
    def write(self) -> Generator[sqlite3.Connection, None, None]:
        """A write transaction: BEGIN IMMEDIATE, COMMIT on success, ROLLBACK on any error.
        SQLite errors leave as StorageError; a failed COMMIT never passes for success."""
        conn = self._begin_write()
        try:
            yield conn
        except BaseException as exc:
            self._abandon(conn, exc)
            if isinstance(exc, sqlite3.Error):
                raise self.failure(exc, "nothing was stored") from exc
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._abandon(conn, exc)
            # An I/O error while syncing can leave a complete commit in the WAL file.
            outcome = "it may not have been stored" if primary_code(exc) == IOERR else "nothing was stored"
            raise self.failure(exc, outcome) from exc

    def _begin_write(self) -> sqlite3.Connection:
        """BEGIN IMMEDIATE on this thread's connection, retried once on a fresh connection when
        the failure may be the connection's own (read-only since it opened, file replaced)."""
        slot = self._slot()
        conn = self._reopen() if slot.read_only else slot.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            return conn
        except sqlite3.Error as exc:
            if primary_code(exc) not in _REOPEN_CODES:
                raise self.failure(exc, "nothing was stored") from exc
        conn = self._reopen()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self._drop(conn)
            raise self.failure(exc, "nothing was stored") from exc
        return conn

    def _abandon(self, conn: sqlite3.Connection, exc: BaseException) -> None:
        """Roll back what is left of a failed transaction without hiding the error that failed
        it: after disk full or an I/O error SQLite has often rolled back already."""
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                self._drop(conn)  # state unknown: do not hand it out again
                return
        if isinstance(exc, sqlite3.Error) and primary_code(exc) in _REOPEN_CODES:
            self._drop(conn)

    @contextmanager
    def snapshot(self) -> Generator[sqlite3.Connection, None, None]:
        """A read transaction: several SELECTs that see one consistent state."""
        conn = self.connection()
        try:
            conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise self.failure(exc) from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            raise self.failure(exc) from exc
        finally:
            self._end_read(conn)

    def _end_read(self, conn: sqlite3.Connection) -> None:
        try:
            if conn.in_transaction:
                conn.execute("COMMIT")
        except sqlite3.Error:
            self._drop(conn)  # a connection stuck in a transaction would fail every BEGIN

    def failure(self, exc: sqlite3.Error, outcome: str = "") -> StorageError:
        """One line saying what happened to the database and what to do about it."""
        data_dir, code = self.path.parent, primary_code(exc)
        tail = f"; {outcome}" if outcome else ""
        if code == FULL:
            return StorageError(f"the disk holding data_dir ({data_dir}) is full: free space and "
                                f"retry{tail}", kind="full")
        if code == READONLY or (code == CANTOPEN and not os.access(data_dir, os.W_OK)):
            return StorageError(f"data_dir {data_dir} is read-only: {exc}; make it writable for "
                                f"this user and retry{tail}", kind="read_only")
        if code in (BUSY, LOCKED):
            return StorageError("the database stayed locked by another process for longer than "
                                f"storage.busy_timeout_ms ({self._busy_timeout_ms} ms); retry{tail}",
                                kind="locked")
        if code in (CORRUPT, NOTADB):
            return StorageError(f"the database {self.path} is damaged ({exc}): run `aokun doctor`, "
                                f"and `aokun restore FILE` from a backup if it confirms{tail}",
                                kind="corrupt")
        if code == CANTOPEN:
            return StorageError(f"cannot open the database {self.path} ({exc}): check that data_dir "
                                f"is writable and the process has file descriptors left{tail}",
                                kind="cannot_open")
        if code == IOERR:
            return StorageError(f"I/O error on the database {self.path} ({exc}): check the disk "
                                f"holding data_dir{tail}", kind="io")
        return StorageError(f"database error on {self.path}: {exc}{tail}")

    def close(self) -> None:
        """Close every connection still open, whatever thread opened it (call from the owning
        process at exit); threads that use the database afterwards open new ones."""
        with self._open_lock:
            connections = list(self._open)
            self._open.clear()
        for conn in connections:
            try:
                conn.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()


def apply_migrations(db: Database, migrations: Sequence[Migration]) -> list[int]:
    """Apply the migrations not yet recorded, each in its own transaction; return their versions."""
    with db.write() as tx:
        tx.execute(MIGRATIONS_DDL)
    applied: list[int] = []
    for migration in sorted(migrations, key=lambda m: m.version):
        with db.write() as tx:
            done = tx.execute("SELECT 1 FROM schema_migrations WHERE version = ?",
                              (migration.version,)).fetchone()
            if done:
                continue
            for statement in migration.statements:
                tx.execute(statement)
            tx.execute("INSERT INTO schema_migrations (version, name, applied_time) VALUES (?, ?, ?)",
                       (migration.version, migration.name, time.time()))
            applied.append(migration.version)
    return applied


@contextmanager
def savepoint(conn: sqlite3.Connection, name: str) -> Generator[sqlite3.Connection, None, None]:
    """A nested transaction inside the caller's: released on success, rolled back (and the
    error passed on) on failure, leaving the outer transaction going."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:  # else SQLite rolled everything back itself (disk full, I/O)
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")
