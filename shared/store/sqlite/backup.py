"""SQLite backups: an online copy with SQLite's backup API into the backups folder (backup.py),
and the integrity check a backup file must pass before it is kept or restored."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from shared.config import StorageConfig
from shared.errors import StorageError
from shared.store.backup import DUMP_SUFFIX, SQLITE_SUFFIX, other_engine_refusal, refuse_restoring, write_backup
from shared.store.sqlite.db import Database
from shared.store.sqlite.restore import restore_file


def backup_database(db: Database, directory: Path, now: float, reason: str) -> Path:
    """Copy the live database into a new file in directory (writers keep going); return it.
    Never overwrites an earlier backup. It is written as <name>.partial and renamed once
    whole and checked; a failure removes the partial file, and a process killed while writing
    leaves it to the next sweep (sweep_partials: at start, and before every backup)."""
    return write_backup(directory, now, reason, SQLITE_SUFFIX, lambda partial: _copy_into(db, partial), integrity)


def _copy_into(db: Database, partial: Path) -> None:
    target = sqlite3.connect(partial, isolation_level=None)
    try:
        # The copy carries the source's WAL flag in its header; a rollback journal instead
        # leaves no -wal/-shm beside the file, and the copy is one self-contained file.
        # WAL readers do not block writers; pages=1000 lets writers interleave on big stores.
        db.connection().backup(target, pages=1000, sleep=0.001)
        target.execute("PRAGMA journal_mode = DELETE")
    except sqlite3.Error as exc:
        raise StorageError(f"backup failed: {exc}") from exc
    finally:
        target.close()


def integrity(path: Path) -> tuple[bool, str]:
    """(ok, detail) from PRAGMA integrity_check, opening the file read-only."""
    if not Path(path).is_file():
        return False, f"{path} is not a file"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return False, f"not a readable SQLite database ({exc})"
    if rows != [("ok",)]:
        return False, "; ".join(str(r[0]) for r in rows[:5])
    if "documents" not in tables:
        return False, "not an Aokun database (no documents table)"
    return True, "ok"


def restore_backup(file: Path, storage: StorageConfig, live_workers: list[str]) -> Path:
    """The SQLite side of shared.store.restore: a checked backup file put in place as the store's."""
    if Path(file).name.endswith(DUMP_SUFFIX):
        raise other_engine_refusal(file, "a PostgreSQL dump (*.dump)", "PostgreSQL", "SQLite")
    refuse_restoring(file, integrity(file), live_workers, storage.data_dir)
    return restore_file(file, storage)


def backup_holds(path: Path, memory_id: int, content_hash: str, create_time: float) -> bool:
    """Whether a SQLite backup file holds the memory (a documents row with its id and its text
    now or its creation time), the file opened read-only and immutable (nothing is written, no
    journal is made); one that cannot be read holds nothing."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            row = conn.execute("SELECT 1 FROM documents WHERE id = ? AND (content_hash = ? OR "
                               "create_time = ?)", (memory_id, content_hash, create_time)).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return row is not None
