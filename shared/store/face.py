"""What a process may ask about a store from its config alone, without opening it; the answer
depends on the engine, so it is given here, where engine branches belong."""

from __future__ import annotations

from shared.config import StorageConfig

# Lazy imports: the PostgreSQL engine (psycopg and its pool) loads only for a PostgreSQL store.


def location(storage: StorageConfig) -> str:
    """Where the store is, for messages (never a password): the SQLite database file, or
    "postgresql host:port/database"."""
    if storage.backend == "postgresql":
        from shared.store.postgres.connection import where

        return f"postgresql {where(storage.url)}"
    return str(storage.db_path)
