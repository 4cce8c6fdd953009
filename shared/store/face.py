"""What the rest of the code asks about the configured store without opening it: whether one
may be there, which store it is, which secrets it needs. The engine (storage.backend) is
decided here and in open_store, nowhere outside shared/store."""

from __future__ import annotations

from urllib.parse import urlsplit

from shared.config import StorageConfig

# Lazy imports: the PostgreSQL engine (psycopg and its pool) loads only for a PostgreSQL store.

POSTGRES_PORT = 5432


def _on_postgres(storage: StorageConfig) -> bool:
    return storage.backend == "postgresql"


def may_exist(storage: StorageConfig) -> bool:
    """Whether opening the store could find one: a SQLite file that is there, or any
    PostgreSQL server (which only opening it can tell)."""
    return _on_postgres(storage) or storage.db_path.exists()


def address(storage: StorageConfig) -> str:
    """Which store a config names, the same from any config file naming it (no password)."""
    if _on_postgres(storage):
        url = urlsplit(storage.url)
        return f"postgresql://{url.hostname}:{url.port or POSTGRES_PORT}{url.path}"
    return str(storage.db_path)


def secret_env_names(storage: StorageConfig) -> list[str]:
    """The environment variables the store reads a secret from: storage.password_env on
    PostgreSQL when the URL holds no password."""
    if _on_postgres(storage) and storage.password_env and not urlsplit(storage.url).password:
        return [storage.password_env]
    return []


def location(storage: StorageConfig) -> str:
    """Where the store is, for messages (never a password): the SQLite database file, or
    "postgresql host:port/database"."""
    if _on_postgres(storage):
        from shared.store.postgres.connection import where

        return f"postgresql {where(storage.url)}"
    return str(storage.db_path)
