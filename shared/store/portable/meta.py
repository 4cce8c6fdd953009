"""The meta table: one numeric value per key, and the only module that reads or writes it.

Every key is named here, so what a store keeps outside its tables is listed in one place.
"""

from __future__ import annotations

import secrets

from shared.store.model.meta import KEYS, STORE_ID, VECTOR_SEQ, WRITE_EPOCH
from shared.store.portable.connection import Connection


def get(conn: Connection, key: str) -> float | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_known(key),)).fetchone()
    return None if row is None else _number(row[0])


def _number(value: float) -> float:
    """An integral value as an int, as SQLite's INTEGER column gives it back: PostgreSQL's
    DOUBLE PRECISION column gives 5.0 for the 5 it was given."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 63:
        return int(value)
    return value


def put(conn: Connection, key: str, value: float) -> None:
    """Set a value (inside the caller's write transaction)."""
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)"
                 " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (_known(key), value))


def increment(conn: Connection, key: str) -> int:
    """Add one and return the new value (inside the caller's write transaction)."""
    _add_one(conn, key)
    return int(conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0])


def _add_one(conn: Connection, key: str) -> None:
    conn.execute("INSERT INTO meta (key, value) VALUES (?, 1)"
                 " ON CONFLICT (key) DO UPDATE SET value = meta.value + 1", (_known(key),))


def bump_epoch(conn: Connection) -> None:
    """Note a change that recall results depend on (call inside the write transaction; one
    statement: on a database server every statement is a round trip)."""
    _add_one(conn, WRITE_EPOCH)


def recall_epoch(conn: Connection) -> int:
    """Changes whenever any process changes what recall can return: document writes bump
    write_epoch, vector writes bump vector_seq; both only grow, so their sum does too."""
    return int(conn.execute("SELECT COALESCE(SUM(value), 0) FROM meta WHERE key IN (?, ?)",
                            (WRITE_EPOCH, VECTOR_SEQ)).fetchone()[0])


def _known(key: str) -> str:
    if key not in KEYS:
        raise KeyError(f"unknown meta key {key!r}")  # a programming error, not user input
    return key


def store_id(conn: Connection) -> int | None:
    """This store's random id, or None before anything needed one."""
    value = get(conn, STORE_ID)
    return None if value is None else int(value)


def ensure_store_id(conn: Connection, bits: int = 62) -> int:
    """This store's random id, made now if it has none (inside the caller's write transaction).
    `bits`: what the meta column holds exactly (62 fits SQLite's INTEGER; a DOUBLE PRECISION
    column holds integers below 2**53 exactly)."""
    existing = store_id(conn)
    if existing is not None:
        return existing
    new = secrets.randbits(bits) | 1  # positive, never 0
    put(conn, STORE_ID, new)
    return new
