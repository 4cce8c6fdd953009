"""Every table's rows as they are, for copying a store to another engine (`aokun migrate`).

A copy keeps ids, times and every other column: it reads each table in primary-key order,
a page at a time, and writes the rows with insert-if-absent by primary key, one committed
write per page, so a copy that was killed is finished by running it again (the rows already
there are skipped). The full-text rows are copied from the source's index, not remade from
text, so the target ranks what the source ranked.

What is copied is the data, not the processes: the rows of workers, fronts and periodic
claims describe processes running against the source, and stay behind.

The SQL below is portable (qmark placeholders; the PostgreSQL connection face translates
them), except where SQLite is spelled out: the catalogue (sqlite_master, PRAGMA table_info)
and the FTS5 tables, which the PostgreSQL store replaces (shared/store/postgres/tables.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from shared.errors import StorageError
from shared.store.model.tables import (
    LATE_REFERENCES,
    REPLACED,
    TABLE_KEYS,
    fulltext_index,
    fulltext_values,
    known_table,
)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- the catalogue (SQLite) --------------------------------------------------------------------

def names(conn: sqlite3.Connection) -> list[str]:
    """The copied tables this store has, in copy order."""
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return [table for table in TABLE_KEYS if table in present]


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    known_table(table)
    return [r[1] for r in conn.execute(f"PRAGMA table_info({_quoted(table)})")]


# -- rows (portable SQL) -----------------------------------------------------------------------

def clear_replaced(conn: sqlite3.Connection) -> int:
    """clear_replaced_in with this SQLite store's tables."""
    return clear_replaced_in(conn, names(conn))


def clear_replaced_in(conn, present: Sequence[str]) -> int:
    """Before a copy into an empty store: drop its REPLACED tables' rows (its own bookkeeping,
    such as the vector sequence its migrations set), so that after the copy those tables hold
    the source's rows and nothing else; return how many went."""
    return sum(conn.execute(f"DELETE FROM {_quoted(table)}").rowcount
               for table in sorted(REPLACED) if table in present)


def count(conn, table: str) -> int:
    known_table(table)
    return conn.execute(f"SELECT COUNT(*) FROM {_quoted(table)}").fetchone()[0]


def page(conn, table: str, after: Sequence[Any] | None, limit: int) -> list:
    """Up to `limit` rows (every column) with a primary key above `after` (None: from the
    first), in key order. Each engine orders text keys by its own rules; a copy only ever
    continues a page of the same engine."""
    key = ", ".join(_quoted(c) for c in known_table(table))
    if after is None:
        return conn.execute(f"SELECT * FROM {_quoted(table)} ORDER BY {key} LIMIT ?", (limit,)).fetchall()
    marks = ", ".join("?" * len(after))
    return conn.execute(f"SELECT * FROM {_quoted(table)} WHERE ({key}) > ({marks}) ORDER BY {key} LIMIT ?",
                        (*after, limit)).fetchall()


def put(conn: sqlite3.Connection, table: str, rows: Sequence[Any]) -> int:
    """insert_absent with this SQLite table's columns."""
    return insert_absent(conn, table, rows, columns(conn, table))


def insert_absent(conn, table: str, rows: Sequence[Any], target_columns: Sequence[str]) -> int:
    """Insert the rows (Records or mappings, every column named) whose primary key is not
    there yet (in a REPLACED table: write them over the target's); return how many were
    written. A source column the target lacks is refused (StorageError): the two stores'
    schemas differ. `target_columns`: the table's columns in this store's catalogue."""
    if not rows:
        return 0
    names_ = list(dict(rows[0]).keys())
    _check_columns(table, names_, target_columns)
    late = LATE_REFERENCES.get(table)
    values = [[_late_null(late, name, row[name]) for name in names_] for row in rows]
    cursor = conn.executemany(
        f"INSERT INTO {_quoted(table)} ({', '.join(_quoted(n) for n in names_)})"
        f" VALUES ({', '.join('?' * len(names_))}) {_on_conflict(table, names_)}", values)
    inserted = cursor.rowcount
    if late is not None:
        link_late(conn, table, rows)
    return inserted


def _on_conflict(table: str, names_: Sequence[str]) -> str:
    """Skip a row whose key is there, or for a REPLACED table write the copied values over it."""
    key = known_table(table)
    if table not in REPLACED:
        return "ON CONFLICT DO NOTHING"
    updates = ", ".join(f"{_quoted(n)} = excluded.{_quoted(n)}" for n in names_ if n not in key)
    return f"ON CONFLICT ({', '.join(_quoted(c) for c in key)}) DO UPDATE SET {updates}"


def _check_columns(table: str, given: Sequence[str], target_columns: Sequence[str]) -> None:
    known_table(table)
    missing = [name for name in given if name not in target_columns]
    if missing:
        raise StorageError(f"the target's {table} table has no column {', '.join(missing)}: the two "
                           "stores are at different schema versions (open each with the same "
                           "Aokun version first); nothing of this table was copied")


def _late_null(late: tuple[str, str] | None, name: str, value: Any) -> Any:
    return None if late is not None and name == late[0] else value


def link_late(conn, table: str, rows: Sequence[Any]) -> int:
    """Set each row's late reference (LATE_REFERENCES) where the target still has none and the
    row it names is there now; return how many were set. A reference to a row of a later
    page is set by putting the rows again once every page is in (aokun migrate's second pass
    over the table)."""
    column, refers_to = LATE_REFERENCES[table]
    key = known_table(table)[0]
    pairs = [(row[column], row[key], row[column]) for row in rows if row[column] is not None]
    if not pairs:
        return 0
    cursor = conn.executemany(
        f"UPDATE {_quoted(table)} SET {_quoted(column)} = ? WHERE {_quoted(key)} = ?"
        f" AND {_quoted(column)} IS NULL AND EXISTS"
        f" (SELECT 1 FROM {_quoted(table)} AS referred WHERE referred.{_quoted(refers_to)} = ?)", pairs)
    return cursor.rowcount


# -- full text (SQLite's FTS5 tables) ----------------------------------------------------------

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
