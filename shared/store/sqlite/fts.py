"""Delete means gone: full-text indexes that keep no word of a deleted row.

PRAGMA secure_delete zeroes deleted rows and freed pages, but an FTS5 index is a set of
segments (blobs in `<table>_data`), and deleting a row does not touch them: FTS5 writes a delete
marker — the row's terms once more — into a new segment, and the terms stay in the file until
a merge reaches the oldest segment. Two ways to drop them inside the deleting transaction:

- SQLite >= 3.44: the table option 'secure-delete' edits the existing segments in place at
  each delete, at a cost that does not grow with the store (the first one also optimizes once). It
  is persistent, and the first delete with it raises the table's format to version 5, which
  SQLite 3.40 refuses to read ("invalid fts5 file format"); to go back, set the table's
  `version` row in `<table>_config` to 4, delete its `secure-delete` row, then 'rebuild'.
- Older SQLite: 'optimize' merges every segment into one, which drops the delete markers and
  the entries they shadow. It rewrites the whole index, so its cost grows with the store
  (scripts/bench_delete.py; docs/performance.md). No partial
  'merge' does it for less: markers only vanish when merged into the oldest segment, which is
  rewritten whole, and the row's own entries sit in that segment once it is old.

Then the pages from before the delete are still in the WAL file, and in the database file
until a checkpoint copies the new ones back: flush_deleted() checkpoints and truncates the WAL.

Use: every connection runs configure_connection() when it opens; in the delete path
(`tables`: the full-text tables that lost rows):

    with db.write() as tx:
        ...DELETE the rows...
        fts.scrub_terms(tx, tables)
    fts.flush_deleted(db.connection())
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable

from shared.errors import StorageError
from shared.store.model.fulltext import FTS_TABLES

log = logging.getLogger(__name__)

IN_PLACE_FROM = (3, 44, 0)  # FTS5 'secure-delete' (3.42) with the fixes that followed it
FLUSH_WAIT_MS = 200  # how long flush_deleted waits for readers before settling for less


def configure_connection(conn: sqlite3.Connection) -> None:
    """At open, for every connection: zero deleted rows and freed pages (Debian's SQLite does
    by default, others do not), and cut the WAL back to the frames of the commit that restarts
    it, so pages from before a checkpoint do not linger in its tail."""
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA journal_size_limit = 0")


def library_version(conn: sqlite3.Connection) -> tuple[int, ...]:
    """The SQLite version this connection runs on (a bundled library may differ from stdlib)."""
    return tuple(int(part) for part in conn.execute("SELECT sqlite_version()").fetchone()[0].split("."))


def scrub_terms(conn: sqlite3.Connection, tables: Iterable[str]) -> None:
    """Make each full-text table in `tables` hold no term of the rows deleted from it.

    Call inside the deleting transaction, after its DELETEs, with only the tables that lost
    rows (each costs up to a rewrite of that table's index). SQLite errors propagate, so the
    caller's transaction rolls back: a delete either removes every word or nothing. Refuses
    (StorageError) on a connection that does not zero what it deletes: the rows deleted before
    this call would be left readable."""
    if not conn.execute("PRAGMA secure_delete").fetchone()[0]:
        raise StorageError("this connection does not zero deleted rows (PRAGMA secure_delete is "
                           "off), so nothing was deleted; open it through fts.configure_connection")
    in_place = library_version(conn) >= IN_PLACE_FROM
    for table in tables:
        if table not in FTS_TABLES:
            raise ValueError(f"{table!r} is not one of the full-text tables {FTS_TABLES}")
        if in_place and _in_place_deletes(conn, table):
            continue  # this transaction's deletes already edited the segments
        if in_place:
            # From now on deletes edit segments in place; the optimize below clears what
            # earlier deletes (and this one, made before the option) left behind.
            conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('secure-delete', 1)")
        conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


def scrubs_in_place(conn: sqlite3.Connection) -> bool:
    """Whether scrub_terms is cheap here (in-place secure-delete) rather than a rewrite."""
    return library_version(conn) >= IN_PLACE_FROM


def _in_place_deletes(conn: sqlite3.Connection, table: str) -> bool:
    row = conn.execute(f"SELECT v FROM {table}_config WHERE k = 'secure-delete'").fetchone()
    return bool(row and row[0])


def flush_deleted(conn: sqlite3.Connection, wait_ms: int = FLUSH_WAIT_MS) -> bool:
    """Checkpoint after a delete has committed, so that no page from before it stays in the
    WAL file (truncated to zero bytes) or in the database file (the scrubbed pages are copied
    back). Call on a connection outside any transaction. Returns True when that is done.

    Never raises: the delete is committed whatever happens here. If another connection holds
    a read snapshot older than the delete (or a checkpoint is running), waits at most
    `wait_ms`, copies back what that reader allows, and returns False: the old pages then stay
    in the WAL and the database file until a later checkpoint gets past the reader — the next
    flush_deleted, or SQLite's automatic checkpoint followed by the next WAL restart when the
    writing connections set PRAGMA journal_size_limit = 0 (without it, a restart overwrites
    the WAL from its start but leaves its tail). Whatever this returns, the committed state is
    scrubbed, so a backup taken after the commit (backup API, a read of that state) holds no
    word of the deleted rows."""
    try:
        previous = conn.execute("PRAGMA busy_timeout").fetchone()[0]
        conn.execute(f"PRAGMA busy_timeout = {int(wait_ms)}")
        try:
            busy, wal_frames, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(previous)}")
    except sqlite3.Error as exc:
        log.warning("checkpoint after a delete failed (%s); the next checkpoint completes it", exc)
        return False
    if busy:
        log.info("checkpoint after a delete waits for a reader (%s of %s WAL frames copied); "
                 "the next checkpoint completes it", copied, wal_frames)
    return not busy
