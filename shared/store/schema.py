"""The schema as an ordered list of migrations, gathered from the modules that own the tables."""

from __future__ import annotations

from shared.config import StorageConfig
from shared.store import atoms, documents, graph, runtime, stages, vectors
from shared.store.db import Database, Migration, apply_migrations

MIGRATIONS = [
    Migration(1, "initial schema", [
        *documents.DDL, *stages.DDL, *atoms.DDL, *graph.DDL, *vectors.DDL, *runtime.DDL,
    ]),
    # Before this version the atoms and graph stages ran without extractors: run them again.
    Migration(2, "rule-based atoms and graph", [
        "UPDATE memory_stages SET status = 'pending', attempts = 0, next_attempt_time = NULL,"
        " enqueued_time = NULL, lease_owner = NULL, lease_until = NULL, last_error = NULL"
        " WHERE stage IN ('atoms', 'graph')",
    ]),
]


def open_database(storage: StorageConfig) -> Database:
    """Open the main database under data_dir and bring its schema up to date."""
    db = Database.from_config(storage)
    apply_migrations(db, MIGRATIONS)
    return db
