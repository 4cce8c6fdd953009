"""The schema as an ordered list of migrations, gathered from the modules that own the tables."""

from __future__ import annotations

from shared.config import StorageConfig
from shared.store import atoms, documents, graph, runtime, stages, vectors
from shared.store.db import Database, Migration, apply_migrations

MIGRATIONS = [
    Migration(1, "initial schema", [
        *documents.DDL, *stages.DDL, *atoms.DDL, *graph.DDL, *vectors.DDL, *runtime.DDL,
    ]),
]


def open_database(storage: StorageConfig) -> Database:
    """Open the main database under data_dir and bring its schema up to date."""
    db = Database.from_config(storage)
    apply_migrations(db, MIGRATIONS)
    return db
