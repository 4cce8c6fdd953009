"""Every table's rows as they are, on PostgreSQL (`aokun migrate`; see shared/store/portable/tables.py).

The rows' SQL is shared with SQLite (pages in key order, insert-if-absent); what differs is
the catalogue, the full-text rows (this package's fulltext tables instead of FTS5's, each row
carrying its persona and session for scoping) and the identities: ids copied from another
store are given explicitly (identity BY DEFAULT), which does not advance an identity's
sequence, so finish() moves each one past the largest id copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from shared.store.model.record import Record
from shared.store.model.tables import TABLE_KEYS, fulltext_index, fulltext_values
from shared.store.portable import tables
from shared.store.postgres import fulltext
from shared.store.postgres.connection import PgConnection
from shared.store.runners import Runner

# The tables whose id is an identity column, and that column.
IDENTITIES = (("documents", "id"), ("memory_atoms", "id"), ("graph_nodes", "id"),
              ("graph_edges", "id"), ("graph_entries", "id"))


def names(conn: PgConnection) -> list[str]:
    """The copied tables this store has, in copy order."""
    present = {r[0] for r in conn.sql(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}
    return [table for table in TABLE_KEYS if table in present]


def columns(conn: PgConnection, table: str) -> list[str]:
    tables.known_table(table)
    return [r[0] for r in conn.sql(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = %s ORDER BY ordinal_position", (table,))]


def put(conn: PgConnection, table: str, rows: Sequence[Any]) -> int:
    return tables.insert_absent(conn, table, rows, columns(conn, table))


def clear_replaced(conn: PgConnection) -> int:
    return tables.clear_replaced_in(conn, names(conn))


def fulltext_page(conn: PgConnection, index: str, after: int | None,
                  limit: int) -> tuple[list[tuple[int, tuple[str, ...]]], int | None]:
    """As on SQLite, walking the indexed table's ids (rows without a full-text row, such as
    forgotten atoms, are passed over): the cursor is the last id looked at."""
    spec = fulltext_index(index)
    ids = [r[0] for r in conn.sql(
        sql.SQL("SELECT id FROM {} WHERE id > %s ORDER BY id LIMIT %s").format(sql.Identifier(spec.table)),
        (-1 if after is None else after, limit))]
    stored = fulltext.stored_columns(conn.raw, index, ids) if ids else {}
    found = [(row_id, tuple(stored[row_id])) for row_id in ids if row_id in stored]
    return found, (ids[-1] if len(ids) == limit else None)


def fulltext_put(conn: PgConnection, index: str, rows: Sequence[tuple[int, Sequence[str]]]) -> int:
    """Index the rows the index lacks, for rows of its table that exist, with the persona and
    session the row has there (what a search's scope filters on); return how many."""
    spec = fulltext_index(index)
    ids = [row_id for row_id, _ in rows]
    if not ids:
        return 0
    indexed = fulltext.row_ids_among(conn.raw, index, ids)
    scopes = _scopes(conn, spec.table, ids)
    new = [(row_id, values) for row_id, values in rows if row_id in scopes and row_id not in indexed]
    with conn.raw.pipeline():  # one round trip for the page's statements, not one each
        for row_id, values in new:
            persona_id, session_id = scopes[row_id]
            fulltext.add_row(conn.raw, index, row_id, fulltext_values(values, spec),
                             persona_id, session_id)
    return len(new)


def _scopes(conn: PgConnection, table: str, ids: list[int]) -> dict[int, tuple[str | None, str | None]]:
    """{id: (persona_id, session_id)} of the rows there (graph entries have no session)."""
    session = sql.SQL("session_id") if table != "graph_entries" else sql.SQL("NULL")
    statement = sql.SQL("SELECT id, persona_id, {} FROM {} WHERE id = ANY(%s)").format(
        session, sql.Identifier(table))
    return {r[0]: (r[1], r[2]) for r in conn.sql(statement, (ids,))}


def fulltext_count(conn: PgConnection, index: str) -> int:
    fulltext_index(index)
    return fulltext.rows_count(conn.raw, index)


def finish(conn: PgConnection) -> None:
    """Move every identity past the largest id there, so the next insert takes a new one;
    then gather the planner's statistics of the tables just filled: until autovacuum gets to
    them, a copied store's plans are made for empty tables."""
    for table, column in IDENTITIES:
        conn.sql(sql.SQL(
            "SELECT setval(pg_get_serial_sequence(%s, %s), COALESCE(MAX({column}), 0) + 1, false)"
            " FROM {table}").format(column=sql.Identifier(column), table=sql.Identifier(table)),
            (table, column))
    analyzed = [*names(conn), *fulltext.TABLES]
    conn.sql(sql.SQL("ANALYZE {}").format(sql.SQL(", ").join(sql.Identifier(t) for t in analyzed)))


class PostgresTables:
    """The Tables aggregate (shared/store/interface.py) on PostgreSQL."""

    def __init__(self, run: Runner):
        self._run = run

    def names(self) -> list[str]:
        return self._run.read(names)

    def count(self, table: str) -> int:
        return self._run.read(tables.count, table)

    def page(self, table: str, after: Sequence[Any] | None, limit: int) -> list[Record]:
        return self._run.rows(tables.page, table, after, limit)

    def put(self, table: str, rows: Sequence[Any]) -> int:
        return self._run.write(put, table, rows)

    def clear_replaced(self) -> int:
        return self._run.write(clear_replaced)

    def fulltext_page(self, index: str, after: int | None,
                      limit: int) -> tuple[list[tuple[int, tuple[str, ...]]], int | None]:
        return self._run.read(fulltext_page, index, after, limit)

    def fulltext_put(self, index: str, rows: Sequence[tuple[int, Sequence[str]]]) -> int:
        return self._run.write(fulltext_put, index, rows)

    def fulltext_count(self, index: str) -> int:
        return self._run.read(fulltext_count, index)

    def finish(self) -> None:
        return self._run.write(finish)
