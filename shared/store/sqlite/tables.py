"""Every table's rows on SQLite, for copying a store to another engine: its catalogue
(sqlite_master, PRAGMA table_info) and its FTS5 tables. The copy's portable SQL is
portable/tables.py."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from shared.store.model.tables import TABLE_KEYS, fulltext_index, fulltext_values, known_table
from shared.store.portable.tables import clear_replaced_in, insert_absent, quoted


def names(conn: sqlite3.Connection) -> list[str]:
    """The copied tables this store has, in copy order."""
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return [table for table in TABLE_KEYS if table in present]


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    known_table(table)
    return [r[1] for r in conn.execute(f"PRAGMA table_info({quoted(table)})")]


def clear_replaced(conn: sqlite3.Connection) -> int:
    """clear_replaced_in with this SQLite store's tables."""
    return clear_replaced_in(conn, names(conn))


def put(conn: sqlite3.Connection, table: str, rows: Sequence[Any]) -> int:
    """insert_absent with this SQLite table's columns."""
    return insert_absent(conn, table, rows, columns(conn, table))


def fulltext_page(conn: sqlite3.Connection, index: str, after: int | None,
                  limit: int) -> tuple[list[tuple[int, tuple[str, ...]]], int | None]:
    """Up to `limit` rows of the index ((row id, its columns' text)) after row id `after`,
    by row id, and the row id to continue after (None at the end)."""
    spec = fulltext_index(index)
    rows = conn.execute(
        f"SELECT rowid, {', '.join(spec.columns)} FROM {spec.sqlite_table} WHERE rowid > ?"
        " ORDER BY rowid LIMIT ?", (-1 if after is None else after, limit)).fetchall()
    found = [(r[0], tuple(r[1:])) for r in rows]
    return found, (found[-1][0] if len(found) == limit else None)


def fulltext_put(conn: sqlite3.Connection, index: str, rows: Sequence[tuple[int, Sequence[str]]]) -> int:
    """Index the rows the index lacks, for rows of its table that exist; return how many."""
    spec = fulltext_index(index)
    ids = json.dumps([row_id for row_id, _ in rows])
    indexed = {r[0] for r in conn.execute(
        f"SELECT rowid FROM {spec.sqlite_table} WHERE rowid IN (SELECT value FROM json_each(?))", (ids,))}
    owned = {r[0] for r in conn.execute(
        f"SELECT id FROM {spec.table} WHERE id IN (SELECT value FROM json_each(?))", (ids,))}
    new = [(row_id, *fulltext_values(columns, spec)) for row_id, columns in rows
           if row_id in owned and row_id not in indexed]
    conn.executemany(f"INSERT INTO {spec.sqlite_table} (rowid, {', '.join(spec.columns)})"
                     f" VALUES (?, {', '.join('?' * len(spec.columns))})", new)
    return len(new)


def fulltext_count(conn: sqlite3.Connection, index: str) -> int:
    return conn.execute(f"SELECT COUNT(*) FROM {fulltext_index(index).sqlite_table}").fetchone()[0]


def finish(conn: sqlite3.Connection) -> None:
    """Nothing to do on SQLite: an INTEGER PRIMARY KEY's next id is the largest one plus one."""
