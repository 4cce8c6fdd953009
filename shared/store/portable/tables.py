"""Every table's rows as they are, for copying a store to another engine (`aokun migrate`).

A copy keeps ids, times and every other column: it reads each table in primary-key order,
a page at a time, and writes the rows with insert-if-absent by primary key, one committed
write per page, so a copy that was killed is finished by running it again (the rows already
there are skipped). The full-text rows are copied from the source's index, not remade from
text, so the target ranks what the source ranked.

What is copied is the data, not the processes: the rows of workers, fronts and periodic
claims describe processes running against the source, and stay behind.

The SQL here is portable (qmark placeholders; the PostgreSQL connection face translates
them); each engine's catalogue and full-text tables are its own (sqlite/tables.py,
postgres/tables.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.errors import StorageError
from shared.store.model.tables import (
    LATE_REFERENCES,
    REPLACED,
    known_table,
)
from shared.store.portable.connection import Connection


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def clear_replaced_in(conn: Connection, present: Sequence[str]) -> int:
    """Before a copy into an empty store: drop its REPLACED tables' rows (its own bookkeeping,
    such as the vector sequence its migrations set), so that after the copy those tables hold
    the source's rows and nothing else; return how many went."""
    return sum(conn.execute(f"DELETE FROM {quoted(table)}").rowcount
               for table in sorted(REPLACED) if table in present)


def count(conn: Connection, table: str) -> int:
    known_table(table)
    return conn.execute(f"SELECT COUNT(*) FROM {quoted(table)}").fetchone()[0]


def page(conn: Connection, table: str, after: Sequence[Any] | None, limit: int) -> list[Any]:
    """Up to `limit` rows (every column) with a primary key above `after` (None: from the
    first), in key order. Each engine orders text keys by its own rules; a copy only ever
    continues a page of the same engine."""
    key = ", ".join(quoted(c) for c in known_table(table))
    if after is None:
        return conn.execute(f"SELECT * FROM {quoted(table)} ORDER BY {key} LIMIT ?", (limit,)).fetchall()
    marks = ", ".join("?" * len(after))
    return conn.execute(f"SELECT * FROM {quoted(table)} WHERE ({key}) > ({marks}) ORDER BY {key} LIMIT ?",
                        (*after, limit)).fetchall()


def insert_absent(conn: Connection, table: str, rows: Sequence[Any], target_columns: Sequence[str]) -> int:
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
        f"INSERT INTO {quoted(table)} ({', '.join(quoted(n) for n in names_)})"
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
    updates = ", ".join(f"{quoted(n)} = excluded.{quoted(n)}" for n in names_ if n not in key)
    return f"ON CONFLICT ({', '.join(quoted(c) for c in key)}) DO UPDATE SET {updates}"


def _check_columns(table: str, given: Sequence[str], target_columns: Sequence[str]) -> None:
    known_table(table)
    missing = [name for name in given if name not in target_columns]
    if missing:
        raise StorageError(f"the target's {table} table has no column {', '.join(missing)}: the two "
                           "stores are at different schema versions (open each with the same "
                           "Aokun version first); nothing of this table was copied")


def _late_null(late: tuple[str, str] | None, name: str, value: Any) -> Any:
    return None if late is not None and name == late[0] else value


def link_late(conn: Connection, table: str, rows: Sequence[Any]) -> int:
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
        f"UPDATE {quoted(table)} SET {quoted(column)} = ? WHERE {quoted(key)} = ?"
        f" AND {quoted(column)} IS NULL AND EXISTS"
        f" (SELECT 1 FROM {quoted(table)} AS referred WHERE referred.{quoted(refers_to)} = ?)", pairs)
    return cursor.rowcount
