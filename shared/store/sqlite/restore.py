"""Restoring a SQLite backup over the store's file, all or nothing.

The backup is copied beside the store (<file>.restore-<pid>, its owner's only, synced to disk)
and made ready there (the process rows it carries dropped). The store's file is then held by
this process alone, its write-ahead log folded into it and removed, and the copy renamed over
it: that rename is the one step that changes the store. A restore killed before it leaves the
store's data as it was (the folded file reopens as the same store), one killed after has
nothing left to do. A copy left by a killed restore is removed by the next one. The checks
and refusals before any of this are shared with PostgreSQL's restore (backup.py).
"""

from __future__ import annotations

import math
import os
import shutil
import sqlite3
import time
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

from shared.config import StorageConfig
from shared.errors import StorageError
from shared.platform import POSIX, PRIVATE_FILE, exclusive_file_lock, fsync_directory, private_folder
from shared.sqlite_errors import BUSY, DAMAGED, LOCKED, primary_code
from shared.store.backup import forget_queue, remove_journals, remove_with_journals
from shared.store.portable import runtime

# The copy beside the store (<file>.restore-<pid>), and the lock that keeps two restores of
# one data folder from meeting.
STAGED = ".restore-"
RESTORE_LOCK_NAME = ".restore.lock"


def restore_file(file: Path, storage: StorageConfig) -> Path:
    """Put the (checked) backup `file` in place as the store's SQLite file; return it."""
    private_folder(storage.data_dir)
    target = storage.db_path
    with exclusive_file_lock(storage.data_dir / RESTORE_LOCK_NAME):
        for leftover in target.parent.glob(f"{target.name}{STAGED}*[0-9]"):
            remove_with_journals(leftover)
        staged = target.with_name(f"{target.name}{STAGED}{os.getpid()}")
        try:
            _stage(file, staged)
            with _held_alone(target, storage.busy_timeout_ms):
                forget_queue(storage)
                os.replace(staged, target)
            fsync_directory(target.parent)
        finally:
            remove_with_journals(staged)  # gone already once renamed
    return target


def _stage(file: Path, staged: Path) -> None:
    """The backup copied to `staged` (its owner's only, on disk), without its process rows."""
    with open(file, "rb") as source, open(os.open(staged, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE),
                                          "wb") as copy:
        shutil.copyfileobj(source, copy, 1 << 20)
        copy.flush()
        os.fsync(copy.fileno())
    try:
        _forget_processes(staged)
    except sqlite3.Error as exc:
        raise StorageError(f"could not prepare {file} for restoring: {exc}") from exc


def _forget_processes(path: Path) -> None:
    """Drop the worker and front rows a backup carries: those processes ran on the source
    store, and here they would pass for live ones (refusing the next restore, keeping a
    front from starting a worker)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        runtime.prune_workers(conn, dead_before=math.inf)  # every row beat before infinity
        try:
            runtime.prune_fronts(conn, dead_before=math.inf)
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):  # a backup from before fronts had rows
                raise
        conn.execute("COMMIT")
    finally:
        conn.close()


@contextmanager
def _held_alone(target: Path, busy_timeout_ms: int) -> Generator[None, None, None]:
    """The store's file held by this connection alone for the block, its write-ahead log
    folded into it and removed: renaming another file over it then loses nothing of it until
    the rename, and no log of the old file is left to be replayed into the new one. Another
    process with the store open is waited for busy_timeout_ms, then refused. A file SQLite
    finds damaged (what a restore is for) just has its journals removed."""
    if not target.exists():
        remove_journals(target)
        yield
        return
    conn = sqlite3.connect(target, isolation_level=None, timeout=0)
    try:
        if not _fold_and_lock(conn, target, busy_timeout_ms):
            remove_journals(target)
        if not POSIX:
            conn.close()  # Windows renames nothing over a file this process has open
        yield
    finally:
        conn.close()


def _fold_and_lock(conn: sqlite3.Connection, target: Path, busy_timeout_ms: int) -> bool:
    """Switch the store to a rollback journal (which checkpoints and removes its log, and
    needs every other connection closed; the store switches back to WAL when next opened)
    and take its exclusive lock. False if SQLite finds the file damaged."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = DELETE").fetchone()
            conn.execute("BEGIN EXCLUSIVE")
            return True
        except sqlite3.Error as exc:
            code = primary_code(exc)
            if code in DAMAGED:
                return False
            if code not in (BUSY, LOCKED):
                raise StorageError(f"could not restore over {target} ({exc}); nothing was changed") from exc
            if time.monotonic() > deadline:
                raise StorageError(f"refusing to restore while another process has {target} open (waited "
                                   f"{busy_timeout_ms / 1000:g} s); stop every front and worker on it first") from exc
        time.sleep(0.05)  # the switch does not wait on a busy timeout itself
