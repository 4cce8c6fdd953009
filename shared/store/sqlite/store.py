"""The SQLite implementation of the store interface (shared/store/interface.py).

The SQL stays in the aggregate modules (portable/documents.py, sqlite/documents.py, ...),
whose functions take a connection; aggregates.py binds them to a session's runner (shared/store/runners.py), which
supplies the connection: the transaction of read()/write(), or, on the Store itself, one
transaction per call on the calling thread's connection (joining the thread's open
transaction when there is one). sqlite3 errors leave every call as StorageError in
Database's own wording (rollback, reconnecting and "nothing was stored" decided there).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from shared.config import StorageConfig
from shared.errors import StorageError
from shared.store.interface import (
    Atoms,
    Consistency,
    Documents,
    FullText,
    Graph,
    GraphBrowse,
    Meta,
    Neighbours,
    Runtime,
    Stages,
    Tables,
    Usage,
    Users,
    Vectors,
)
from shared.store.portable.bookkeeping import PortableRuntime, PortableUsage, PortableUsers
from shared.store.runners import InTransaction, PerCall, Runner, Session, write_session
from shared.store.sqlite import fts
from shared.store.sqlite.aggregates import (
    SqliteAtoms,
    SqliteConsistency,
    SqliteDocuments,
    SqliteFullText,
    SqliteGraph,
    SqliteGraphBrowse,
    SqliteMeta,
    SqliteNeighbours,
    SqliteStages,
    SqliteTables,
    SqliteVectors,
)
from shared.store.sqlite.backup import backup_database
from shared.store.sqlite.db import Database
from shared.store.sqlite.schema import open_database


class SqliteSession(Session):
    """Every aggregate, bound to one runner; each attribute is typed with the Protocol it
    implements (shared/store/interface.py), so pyright checks the implementation."""

    def __init__(self, run: Runner):
        super().__init__(run)
        self.documents: Documents = SqliteDocuments(run)
        self.stages: Stages = SqliteStages(run)
        self.graph: Graph = SqliteGraph(run)
        self.graph_browse: GraphBrowse = SqliteGraphBrowse(run)
        self.atoms: Atoms = SqliteAtoms(run)
        self.vectors: Vectors = SqliteVectors(run)
        self.meta: Meta = SqliteMeta(run)
        self.runtime: Runtime = PortableRuntime(run)
        self.usage: Usage = PortableUsage(run)
        self.consistency: Consistency = SqliteConsistency(run)
        self.neighbours: Neighbours = SqliteNeighbours(run)
        self.fts: FullText = SqliteFullText(run)
        self.users: Users = PortableUsers(run)
        self.tables: Tables = SqliteTables(run)


class SqliteStore(SqliteSession):
    """The store on one SQLite file (Database: a connection per thread, WAL, BEGIN IMMEDIATE)."""

    engine = "sqlite"

    def __init__(self, db: Database):
        super().__init__(PerCall(db))
        self.db = db  # the implementation's own; layers above use the interface only
        self.location = str(db.path)
        self.cache_dir = db.path.parent

    @contextmanager
    def read(self) -> Generator[SqliteSession, None, None]:
        with self.db.snapshot() as conn:
            yield SqliteSession(InTransaction(self.db, conn, writable=False))

    def reading(self) -> AbstractContextManager[None]:
        return nullcontext()  # a call's own snapshot costs nothing in-process

    def write(self) -> AbstractContextManager[SqliteSession]:
        return write_session(self.db, SqliteSession)

    def incarnation(self) -> int:
        """The database file's inode: a restored database is a new file."""
        try:
            return os.stat(self.db.path).st_ino
        except OSError:
            return 0

    def flush_deleted(self) -> bool:
        return fts.flush_deleted(self.db.connection())

    def refresh_statistics(self) -> bool:
        # SQLite's plans here come from the schema's indexes (and INDEXED BY where it matters);
        # no sqlite_stat1 is kept, so there is nothing to refresh.
        return True

    def backup(self, directory: Path, now: float, reason: str) -> Path:
        return backup_database(self.db, directory, now, reason)

    def close(self) -> None:
        self.db.close()


def open_sqlite_store(storage: StorageConfig, *, migrate: bool = True) -> SqliteStore:
    """The store in storage.db_path, its schema brought up to date; migrate=False opens an
    existing one as it is and refuses when there is none."""
    if migrate:
        return SqliteStore(open_database(storage))
    if not storage.db_path.is_file():
        raise StorageError(f"no memory store at {storage.db_path} (check storage.data_dir)",
                           kind="cannot_open")
    return SqliteStore(Database.from_config(storage))
