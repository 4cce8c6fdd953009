"""Backups: online copies with SQLite's backup API, retention, integrity checks and restore.

Only the main database is backed up: the queue file is not needed, because the stage rows in
the main database say what work is still to do, and the reconciler re-queues it after a
restore.

A store on PostgreSQL is backed up with pg_dump into `*.dump` files beside (or instead of) the
SQLite store's `*.db` ones (shared/store/postgres/backup.py); both are named, written, checked,
swept and pruned by the same rules here, and retention, latest_backup and backups_holding see
both kinds. A backup holds every memory: its file is its owner's only (0600), in a folder that
is too (0700).
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from shared.config import StorageConfig
from shared.errors import StorageError
from shared.platform import PRIVATE_FILE, exclusive_file_lock, private_folder
from shared.store.db import Database
from shared.store.sqlite_restore import remove_with_journals, restore_file
from shared.units import DAY

PREFIX = "aokun-"
PARTIAL = ".partial"
# Held while a backup is written or leftovers swept, by every process on the folder: a sweep
# never removes a partial file another process is still writing. The OS releases it when its
# holder dies, so a backup killed mid-way leaves its partial file to the next sweep.
LOCK_NAME = ".backup.lock"
# The kinds of backup files: a SQLite database copy, a PostgreSQL pg_dump (custom format).
SQLITE_SUFFIX = ".db"
DUMP_SUFFIX = ".dump"
SUFFIXES = (SQLITE_SUFFIX, DUMP_SUFFIX)


def backup_database(db: Database, directory: Path, now: float, reason: str) -> Path:
    """Copy the live database into a new file in directory (writers keep going); return it.
    Never overwrites an earlier backup. It is written as <name>.partial and renamed once
    whole and checked; a failure removes the partial file, and a process killed while writing
    leaves it to the next sweep (sweep_partials: at start, and before every backup)."""
    return write_backup(directory, now, reason, SQLITE_SUFFIX, lambda partial: _copy_into(db, partial), integrity)


def write_backup(directory: Path, now: float, reason: str, suffix: str,
                 write: Callable[[Path], None], check: Callable[[Path], tuple[bool, str]]) -> Path:
    """A new backup file aokun-<stamp>-<reason><suffix> in directory: `write` fills its
    <name>.partial under the folder's lock (after sweeping leftovers), `check` must pass,
    then it is renamed; on any failure the partial file is removed. Return the file."""
    private_folder(directory)
    with exclusive_file_lock(directory / LOCK_NAME):
        _sweep(directory)
        _make_private(backup_files(directory))  # any written before backups were made private
        path, partial = _reserve_names(directory, now, reason, suffix)
        try:
            write(partial)
            ok, detail = check(partial)
            if not ok:
                raise StorageError(f"the backup failed its integrity check: {detail}")
            _make_private([partial])  # in case the writer made the file anew
            os.replace(partial, path)
        finally:
            remove_with_journals(partial)  # gone already once renamed
    return path


def backup_files(directory: Path) -> list[Path]:
    """The finished backup files in directory, of both kinds, by name."""
    if not Path(directory).is_dir():
        return []
    return sorted(path for suffix in SUFFIXES for path in Path(directory).glob(f"{PREFIX}*{suffix}"))


def sweep_partials(directory: Path) -> list[Path]:
    """Remove the partial files of backups that never finished (their writer was killed);
    return them. A backup being written by a live process is waited for, not touched."""
    if not directory.is_dir():
        return []
    with exclusive_file_lock(directory / LOCK_NAME):
        return _sweep(directory)


def _make_private(paths: list[Path]) -> None:
    """Files readable and writable by their owner only: a backup holds every memory."""
    for path in paths:
        if path.stat().st_mode & 0o077:
            try:
                os.chmod(path, PRIVATE_FILE)
            except PermissionError:
                pass  # another user's file: not ours to change


def _sweep(directory: Path) -> list[Path]:
    found = sorted(path for suffix in SUFFIXES for path in directory.glob(f"{PREFIX}*{suffix}{PARTIAL}"))
    for partial in found:
        remove_with_journals(partial)
    return found


def backups_holding(directory: Path, memory_id: int, content_hash: str, create_time: float) -> list[str]:
    """The names of the backup files in directory that hold the memory: a documents row with
    its id and its text now or its creation time (an earlier version of it, before an edit).
    Each file is opened read-only and immutable (nothing is written, no journal is made);
    a PostgreSQL dump's documents data is read as pg_restore streams it (postgres/backup.py);
    one that cannot be read is left out."""
    holding = []
    for path in backup_files(directory):
        if path.suffix == DUMP_SUFFIX:
            # Lazy imports: pg_restore's reader loads only where a folder holds dumps.
            from shared.store.postgres.dump_reading import dump_holds

            if dump_holds(path, memory_id, content_hash, create_time):
                holding.append(path.name)
            continue
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            try:
                row = conn.execute("SELECT 1 FROM documents WHERE id = ? AND (content_hash = ? OR "
                                   "create_time = ?)", (memory_id, content_hash, create_time)).fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            continue
        if row is not None:
            holding.append(path.name)
    return holding


def _reserve_names(directory: Path, now: float, reason: str, suffix: str = SQLITE_SUFFIX) -> tuple[Path, Path]:
    """(final, partial) names for a new backup. The partial file is created exclusively, so
    two backups in the same millisecond (two processes, or two calls) take different names."""
    stamp = datetime.fromtimestamp(now, timezone.utc).strftime("%Y%m%d-%H%M%S-%f")[:-3]
    for counter in itertools.count(1):
        count = "" if counter == 1 else f"-{counter}"
        path = directory / f"{PREFIX}{stamp}-{reason}{count}{suffix}"
        partial = path.with_name(path.name + PARTIAL)
        try:
            os.close(os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE))
        except FileExistsError:
            continue
        if not path.exists():
            return path, partial
        partial.unlink()
    raise AssertionError("unreachable")


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


def prune_backups(directory: Path, keep_days: float, now: float, keep: Path | None = None) -> list[Path]:
    """Delete backups (of both kinds) older than keep_days (never `keep`); return what was deleted."""
    removed = []
    for path in backup_files(directory):
        if path != keep and now - path.stat().st_mtime > keep_days * DAY:
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


def restore(file: Path, storage: StorageConfig, live_workers: list[str]) -> Path | str:
    """Put a backup in place as the store's data; return where it went (the SQLite file, or
    the PostgreSQL database's host:port/name). Refuses a corrupt file, a backup of the other
    engine, and a store whose worker is alive (stop every process on it first). All or
    nothing on both engines: a restore stopped at any point, killed included, leaves the
    store as it was or wholly restored (sqlite_restore.py, postgres/backup.py)."""
    if storage.backend == "postgresql":
        # Lazy imports: the PostgreSQL restore (psycopg, pg_restore) loads only for a store there.
        from shared.store.postgres.backup import restore_dump

        return restore_dump(file, storage, live_workers)
    if Path(file).name.endswith(DUMP_SUFFIX):
        raise other_engine_refusal(file, "a PostgreSQL dump (*.dump)", "PostgreSQL", "SQLite")
    refuse_restoring(file, integrity(file), live_workers, storage.data_dir)
    return restore_file(file, storage)


def other_engine_refusal(file: Path, backup: str, its_engine: str, this_engine: str) -> StorageError:
    return StorageError(f"refusing to restore {file}: {backup} restores into a store on {its_engine}, "
                        f"and this one is on {this_engine} (storage.backend); to move memories between "
                        "engines use `aokun migrate`")


def refuse_restoring(file: Path, checked: tuple[bool, str], live_workers: list[str], location: object) -> None:
    """The refusals every engine's restore makes before touching anything: a file its check
    (ok, detail) found damaged, and a store with a live worker at location."""
    ok, detail = checked
    if not ok:
        raise StorageError(f"refusing to restore {file}: {detail}")
    if live_workers:
        raise StorageError(f"refusing to restore while a worker is running on {location} "
                           f"({', '.join(live_workers)}); stop it (and every front) first")


def latest_backup(directory: Path) -> dict | None:
    """The newest backup (of either kind) in directory: {path, time, bytes}, or None."""
    found = sorted(backup_files(directory), key=lambda p: p.stat().st_mtime)
    if not found:
        return None
    newest = found[-1]
    stat = newest.stat()
    return {"path": str(newest), "time": stat.st_mtime, "bytes": stat.st_size}
