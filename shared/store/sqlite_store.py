"""The SQLite implementation of the store interface (shared/store/interface.py).

The SQL stays in the aggregate modules (documents.py, stages.py, ...), whose functions take a
connection; this module binds them to one. A session's aggregates (sqlite_repos.py) hand every
call to a runner that owns the connection question:

- `_InTransaction`: inside read() or write(): every call runs on that transaction's
  connection; a read session refuses writes (a deferred SQLite read would quietly upgrade).
- `_PerCall`: the Store used directly: each call is a transaction of its own on the calling
  thread's connection (a read snapshot, so a multi-statement read is consistent, or BEGIN
  IMMEDIATE for a write), or joins the thread's open transaction when there is one: code
  that holds a transaction and calls the store sees its own uncommitted writes.

sqlite3 errors leave every call as StorageError (Database's own wording), so a caller can
catch a failed statement inside a transaction without knowing the engine. The transaction
contexts pass the original error on to Database, which decides rollback, reconnecting and
the message ("nothing was stored") exactly as before.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterator

from shared.errors import StorageError
from shared.store import fts
from shared.store.db import Database, savepoint
from shared.store.interface import Record
from shared.store.sqlite_repos import (SqliteAtoms, SqliteConsistency, SqliteDocuments, SqliteFullText,
                                       SqliteGraph, SqliteGraphBrowse, SqliteMeta, SqliteNeighbours,
                                       SqliteRuntime, SqliteStages, SqliteTables, SqliteUsage,
                                       SqliteUsers, SqliteVectors)
from shared.store.backup import backup_database


def records(rows: list) -> list[Record]:
    """sqlite3.Row results as engine-neutral Records."""
    if not rows:
        return []
    kind = Record.kind(tuple(rows[0].keys()))
    return [kind(row) for row in rows]


class _Runner:
    """How an aggregate's call reaches a connection (see the module docstring)."""

    def __init__(self, db: Database):
        self.db = db

    def read(self, fn: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError

    def write(self, fn: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError

    def iterate(self, fn: Callable[..., Iterator], *args: Any) -> Iterator:
        raise NotImplementedError

    def rows(self, fn: Callable[..., list], *args: Any) -> list[Record]:
        return records(self.read(fn, *args))

    def row(self, fn: Callable[..., Any], *args: Any) -> Record | None:
        found = self.read(fn, *args)
        return None if found is None else records([found])[0]

    def whole(self, fn: Callable[[Database], Any]) -> Any:
        """fn(db) for the few functions that take the Database (their own snapshot)."""
        raise NotImplementedError

    def _call(self, conn: sqlite3.Connection, fn: Callable[..., Any], args: tuple) -> Any:
        try:
            return fn(conn, *args)
        except sqlite3.Error as exc:
            raise self.db._failure(exc) from exc

    def _iterate(self, conn: sqlite3.Connection, fn: Callable[..., Iterator], args: tuple) -> Iterator:
        try:
            yield from fn(conn, *args)
        except sqlite3.Error as exc:
            raise self.db._failure(exc) from exc


class _InTransaction(_Runner):
    """Calls inside one read() or write() transaction."""

    def __init__(self, db: Database, conn: sqlite3.Connection, writable: bool):
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
        conn = self.db.connection()
        if conn.in_transaction:
            return self._call(conn, fn, args)
        with self.db.snapshot() as conn:
            return fn(conn, *args)

    def write(self, fn, *args):
        conn = self.db.connection()
        if conn.in_transaction:
            return self._call(conn, fn, args)
        with self.db.write() as conn:
            return fn(conn, *args)

    def iterate(self, fn, *args):
        conn = self.db.connection()
        if conn.in_transaction:
            yield from self._iterate(conn, fn, args)
            return
        with self.db.snapshot() as conn:
            yield from fn(conn, *args)

    def whole(self, fn):
        conn = self.db.connection()
        return fn(_Joined(self.db, conn)) if conn.in_transaction else fn(self.db)


class _Joined:
    """A Database face on a transaction already open, for functions that take a Database and
    open a snapshot of their own (consistency.all_table_counts): they read inside it."""

    def __init__(self, db: Database, conn: sqlite3.Connection):
        self.db, self.conn = db, conn

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        try:
            yield self.conn
        except sqlite3.Error as exc:
            raise self.db._failure(exc) from exc


class SqliteSession:
    """Every aggregate, bound to one runner."""

    def __init__(self, run: _Runner):
        self._run = run
        self.documents = SqliteDocuments(run)
        self.stages = SqliteStages(run)
        self.graph = SqliteGraph(run)
        self.graph_browse = SqliteGraphBrowse(run)
        self.atoms = SqliteAtoms(run)
        self.vectors = SqliteVectors(run)
        self.meta = SqliteMeta(run)
        self.runtime = SqliteRuntime(run)
        self.usage = SqliteUsage(run)
        self.consistency = SqliteConsistency(run)
        self.neighbours = SqliteNeighbours(run)
        self.fts = SqliteFullText(run)
        self.users = SqliteUsers(run)
        self.tables = SqliteTables(run)

    def _conn(self) -> sqlite3.Connection:
        run = self._run
        return run.conn if isinstance(run, _InTransaction) else run.db.connection()

    @contextmanager
    def savepoint(self, name: str) -> Iterator[None]:
        conn = self._conn()
        if not conn.in_transaction or (isinstance(self._run, _InTransaction) and not self._run.writable):
            raise StorageError("a savepoint needs a write transaction (store.write())")
        try:
            with savepoint(conn, name):
                yield
        except sqlite3.Error as exc:
            raise self._run.db._failure(exc) from exc

    def transaction_alive(self) -> bool:
        return self._conn().in_transaction


class SqliteStore(SqliteSession):
    """The store on one SQLite file (Database: a connection per thread, WAL, BEGIN IMMEDIATE)."""

    engine = "sqlite"

    def __init__(self, db: Database):
        super().__init__(_PerCall(db))
        self.db = db  # the implementation's own; layers above use the interface only
        self.location = str(db.path)
        self.cache_dir = db.path.parent

    @contextmanager
    def read(self) -> Iterator[SqliteSession]:
        with self.db.snapshot() as conn:
            yield SqliteSession(_InTransaction(self.db, conn, writable=False))

    def reading(self) -> AbstractContextManager[None]:
        return nullcontext()  # a call's own snapshot costs nothing in-process

    @contextmanager
    def write(self) -> Iterator[SqliteSession]:
        with self.db.write() as conn:
            try:
                yield SqliteSession(_InTransaction(self.db, conn, writable=True))
            except StorageError as exc:
                # A failed statement: Database rolls back and words it from the original.
                if isinstance(exc.__cause__, sqlite3.Error):
                    raise exc.__cause__
                raise

    def incarnation(self) -> int:
        """The database file's inode: a restored database is a new file."""
        try:
            return os.stat(self.db.path).st_ino
        except OSError:
            return 0

    def flush_deleted(self) -> bool:
        return fts.flush_deleted(self.db.connection())

    def backup(self, directory: Path, now: float, reason: str) -> Path:
        return backup_database(self.db, directory, now, reason)

    def close(self) -> None:
        self.db.close()
