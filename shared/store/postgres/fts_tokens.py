"""The terms SQLite FTS5 makes of a text, with their positions, computed by FTS5 itself.

PostgreSQL's full text (fulltext.py) must index and query exactly the terms that the SQLite
engine's `tokenize = 'porter unicode61 remove_diacritics 2'` makes, or the two engines rank
differently. A Python port of unicode61 would follow Python's Unicode tables, not the ones
compiled into SQLite, and drift on some code points; asking FTS5 is exact by construction for
the SQLite this process runs (the same library the SQLite store uses).

How: each thread keeps an in-memory database with one FTS5 table of that tokenizer and an
`fts5vocab` 'instance' table over it. A call inserts the texts, reads back (row, offset, term),
and rolls back, so the table is empty again. A call costs a transaction, FTS5 writing its
index and the vocab scan (figures: docs/performance.md).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence

TOKENIZE = "porter unicode61 remove_diacritics 2"

_local = threading.local()


def _database() -> sqlite3.Connection:
    """This thread's tokenizing database (a sqlite3 connection is not shared across threads,
    nor across a fork: a child process makes its own)."""
    if getattr(_local, "pid", None) != os.getpid():
        db = sqlite3.connect(":memory:", isolation_level=None)
        db.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize = '{TOKENIZE}')")
        db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        _local.db, _local.pid = db, os.getpid()
    return _local.db


def positions_many(texts: Sequence[str]) -> list[list[tuple[int, str]]]:
    """(position, term) of every token FTS5 makes of each text, in token order."""
    out: list[list[tuple[int, str]]] = [[] for _ in texts]
    if not texts:
        return out
    db = _database()
    db.execute("BEGIN")
    try:
        db.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", list(enumerate(texts, 1)))
        rows: list[tuple[int, int, str]] = db.execute("SELECT doc, offset, term FROM v").fetchall()
    finally:
        db.execute("ROLLBACK")
    for doc, offset, term in rows:
        out[doc - 1].append((offset, term))
    for tokens in out:
        tokens.sort()
    return out


def tokens_many(texts: Sequence[str]) -> list[list[str]]:
    """The tokens of each text in order (a query term's list is an FTS5 phrase)."""
    return [[term for _, term in tokens] for tokens in positions_many(texts)]


def tokens(text: str) -> list[str]:
    """The tokens FTS5 makes of one text, in order."""
    return tokens_many([text])[0]
