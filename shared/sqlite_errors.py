"""SQLite's primary result codes, and the code of an error: shared by the store
(shared/store/sqlite/db.py) and the queue file (shared/queue.py), the two SQLite files a process opens."""

from __future__ import annotations

import sqlite3

# Primary result codes (the low byte of an extended code, e.g. SQLITE_READONLY_DIRECTORY).
BUSY, LOCKED, READONLY, IOERR, CORRUPT, FULL, CANTOPEN, NOTADB = 5, 6, 8, 10, 11, 13, 14, 26
DAMAGED = frozenset({CORRUPT, NOTADB})  # the file itself is damaged

# Python 3.10 has no sqlite_errorcode: there, SQLite's fixed messages tell the code.
_CODE_BY_MESSAGE = {"database or disk is full": FULL, "readonly database": READONLY,
                    "database is locked": BUSY, "table is locked": LOCKED, "malformed": CORRUPT,
                    "file is not a database": NOTADB, "not a database": NOTADB,
                    "unable to open": CANTOPEN, "disk I/O error": IOERR}


def primary_code(exc: sqlite3.Error) -> int | None:
    """The error's primary result code, or None when neither its code nor its text tells."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    return next((c for text, c in _CODE_BY_MESSAGE.items() if text in str(exc)), None)
