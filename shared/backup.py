"""Backups: online copies with SQLite's backup API, retention, integrity checks and restore.

Only the main database is backed up: the queue file is not needed, because the stage rows in
the main database say what work is still to do, and the reconciler re-queues it after a
restore.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path

from shared.config import StorageConfig
from shared.errors import StorageError
from shared.store.db import Database

PREFIX = "aokun-"


def backup_database(db: Database, directory: Path, now: float, reason: str) -> Path:
    """Copy the live database into directory (writers keep going); return the file written."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.fromtimestamp(now, timezone.utc).strftime("%Y%m%d-%H%M%S")
    path = directory / f"{PREFIX}{stamp}-{reason}.db"
    partial = path.with_suffix(".partial")
    target = sqlite3.connect(partial)
    try:
        # WAL readers do not block writers; pages=1000 lets writers interleave on big stores.
        db.connection().backup(target, pages=1000, sleep=0.001)
    except sqlite3.Error as exc:
        raise StorageError(f"backup failed: {exc}") from exc
    finally:
        target.close()
    ok, detail = integrity(partial)
    if not ok:
        partial.unlink(missing_ok=True)
        raise StorageError(f"the backup failed its integrity check: {detail}")
    os.replace(partial, path)
    return path


def prune_backups(directory: Path, keep_days: float, now: float, keep: Path | None = None) -> list[Path]:
    """Delete backups older than keep_days (never `keep`); return what was deleted."""
    removed = []
    for path in directory.glob(f"{PREFIX}*.db"):
        if path != keep and now - path.stat().st_mtime > keep_days * 86_400:
            path.unlink()
            removed.append(path)
    return removed


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


def restore(file: Path, storage: StorageConfig, live_workers: list[str]) -> Path:
    """Put a backup in place as data_dir's database. Refuses a corrupt file, and a data_dir
    whose worker is alive (stop every process on it first)."""
    ok, detail = integrity(file)
    if not ok:
        raise StorageError(f"refusing to restore {file}: {detail}")
    if live_workers:
        raise StorageError(f"refusing to restore while a worker is running on {storage.data_dir} "
                           f"({', '.join(live_workers)}); stop it (and every front) first")
    storage.data_dir.mkdir(parents=True, exist_ok=True)
    target = storage.db_path
    staged = target.with_name(target.name + f".restore-{int(time.time())}")
    shutil.copyfile(file, staged)
    for suffix in ("-wal", "-shm"):
        Path(str(target) + suffix).unlink(missing_ok=True)
    os.replace(staged, target)
    # Queued messages refer to the old database; the stage rows will re-create what is needed.
    for path in (storage.queue_path, Path(str(storage.queue_path) + "-wal"), Path(str(storage.queue_path) + "-shm")):
        path.unlink(missing_ok=True)
    return target
