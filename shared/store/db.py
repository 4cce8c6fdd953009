"""SQLite access: WAL, busy_timeout, BEGIN IMMEDIATE writes and a small migrations table.

Every process (front, worker, admin CLI) opens the same database file. Each thread gets its
own connection; every write transaction starts with BEGIN IMMEDIATE because a deferred
transaction that later upgrades to a write fails with "database is locked" at once, whatever
busy_timeout says.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from shared.config import StorageConfig
from shared.errors import StorageError

MIGRATIONS_DDL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_time REAL NOT NULL
)
"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: Sequence[str]


class Database:
    """One SQLite file shared by all processes; a connection per thread."""

    def __init__(self, path: Path, busy_timeout_ms: int = 10_000, synchronous: str = "full"):
        self.path = Path(path)
        self._busy_timeout_ms = busy_timeout_ms
        self._synchronous = synchronous
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()

    @classmethod
    def from_config(cls, storage: StorageConfig) -> "Database":
        return cls(storage.db_path, storage.busy_timeout_ms, storage.synchronous)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use (autocommit; we BEGIN explicitly)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=self._busy_timeout_ms / 1000)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            self._enable_wal(conn)
            conn.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open database {self.path}: {exc}") from exc
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
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: BEGIN IMMEDIATE, COMMIT on success, ROLLBACK on any error."""
        conn = self.connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot start a write transaction: {exc}") from exc
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise StorageError(f"commit failed: {exc}") from exc

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several SELECTs that see one consistent state."""
        conn = self.connection()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close every connection this object opened (call from the owning process at exit)."""
        with self._all_lock:
            for conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()


def apply_migrations(db: Database, migrations: Sequence[Migration]) -> list[int]:
    """Apply the migrations not yet recorded, each in its own transaction; return their versions."""
    conn = db.connection()
    conn.execute(MIGRATIONS_DDL)
    applied = []
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
