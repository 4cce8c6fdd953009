"""The backups folder: how backup files are named, written, swept, pruned and found, whichever
engine wrote them (SQLite's copies: sqlite/backup.py; PostgreSQL's dumps: postgres/backup.py).

Only the main database is backed up: the queue file is not needed, because the stage rows in
the main database say what work is still to do, and the reconciler re-queues it after a
restore.

A store on PostgreSQL is backed up with pg_dump into `*.dump` files beside (or instead of) the
SQLite store's `*.db` ones (shared/store/postgres/backup.py); both are named, written, checked,
swept and pruned by the same rules here, and retention and latest_backup see both kinds
(shared.store.backups_holding reads both). A backup holds every memory: its file is its
owner's only (0600), in a folder that is too (0700).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from shared.config import StorageConfig
from shared.errors import StorageError
from shared.platform import PRIVATE_FILE, exclusive_file_lock, private_folder
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


def prune_backups(directory: Path, keep_days: float, now: float, keep: Path | None = None) -> list[Path]:
    """Delete backups (of both kinds) older than keep_days (never `keep`); return what was deleted."""
    removed: list[Path] = []
    for path in backup_files(directory):
        if path != keep and now - path.stat().st_mtime > keep_days * DAY:
            path.unlink()
            removed.append(path)
    return removed


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


def latest_backup(directory: Path) -> dict[str, str | float] | None:
    """The newest backup (of either kind) in directory: {path, time, bytes}, or None."""
    found = sorted(backup_files(directory), key=lambda p: p.stat().st_mtime)
    if not found:
        return None
    newest = found[-1]
    stat = newest.stat()
    return {"path": str(newest), "time": stat.st_mtime, "bytes": stat.st_size}


def forget_queue(storage: StorageConfig) -> None:
    """Remove this host's queue file: its messages refer to the data being replaced. Nothing
    in it is needed either way — the reconciler re-queues what the stage rows say is to do —
    so a restore removes it before its switch, and one killed after the switch has nothing
    left to do."""
    for path in (storage.queue_path, Path(str(storage.queue_path) + "-wal"), Path(str(storage.queue_path) + "-shm")):
        path.unlink(missing_ok=True)


def remove_with_journals(path: Path) -> None:
    Path(path).unlink(missing_ok=True)
    remove_journals(path)


def remove_journals(path: Path) -> None:
    for suffix in ("-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
