"""The store's face: open one, restore one from a backup, or find the backups that hold a
memory, each on the engine it is for. What a store offers is its interface (interface.py:
Store, Session, one Protocol per aggregate) over the engine-free model (model/); the engines
are sibling packages, sqlite/ and postgres/, each subclassing the aggregates of portable/
whose SQL both run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from shared.config import StorageConfig
from shared.store.backup import DUMP_SUFFIX, backup_files
from shared.store.sqlite.backup import backup_holds, restore_backup
from shared.store.sqlite.store import open_sqlite_store

if TYPE_CHECKING:
    from shared.store.interface import Store


def open_store(storage: StorageConfig, *, migrate: bool = True) -> Store:
    """The store (shared/store/interface.py): the one entry every process opens it by, on the
    engine storage.backend names. migrate=False opens an existing store as it is, never
    creating or migrating it (the hook, a restore's probe), and refuses when there is none."""
    if storage.backend == "postgresql":
        # Lazy imports: psycopg and its pool load only where the store is on PostgreSQL.
        from shared.store.postgres.store import open_postgres_store

        return open_postgres_store(storage, migrate=migrate)
    return open_sqlite_store(storage, migrate=migrate)


def restore(file: Path, storage: StorageConfig, live_workers: list[str]) -> Path | str:
    """Put a backup in place as the store's data; return where it went (the SQLite file, or
    the PostgreSQL database's host:port/name). Refuses a corrupt file, a backup of the other
    engine, and a store whose worker is alive (stop every process on it first). All or
    nothing on both engines: a restore stopped at any point, killed included, leaves the
    store as it was or wholly restored (sqlite/restore.py, postgres/backup.py)."""
    if storage.backend == "postgresql":
        # Lazy imports: as in open_store.
        from shared.store.postgres.backup import restore_dump

        return restore_dump(file, storage, live_workers)
    return restore_backup(file, storage, live_workers)


def backups_holding(directory: Path, memory_id: int, content_hash: str, create_time: float) -> list[str]:
    """The names of the backup files in directory (of both engines) that hold the memory: a
    documents row with its id and its text now or its creation time (an earlier version of
    it, before an edit). A PostgreSQL dump's documents data is read as pg_restore streams it;
    a file that cannot be read is left out."""
    holding: list[str] = []
    for path in backup_files(directory):
        if path.suffix == DUMP_SUFFIX:
            # Lazy imports: pg_restore's reader loads only where a folder holds dumps.
            from shared.store.postgres.dump_reading import dump_holds

            if dump_holds(path, memory_id, content_hash, create_time):
                holding.append(path.name)
        elif backup_holds(path, memory_id, content_hash, create_time):
            holding.append(path.name)
    return holding
