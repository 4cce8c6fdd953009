"""Documents, their full text, conversation context and consistency on PostgreSQL: the portable
aggregates (shared/store/portable/aggregates.py) with PostgreSQL versions of the methods whose
SQL is each engine's own — the BM25 rows live in this package's full-text tables
(fulltext.py), id lists are arrays, and a new id comes back by RETURNING.

The functions take a PgConnection (connection.py): `execute` for the qmark SQL shared with
SQLite, `sql` for statements written for PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import psycopg
import psycopg.sql

from shared.store.model.documents import Document, DocumentFilter, MemoryFields, outdated
from shared.store.model.fulltext import FTS_TABLES, MAX_QUERY_TERMS, scope_tokens
from shared.store.portable import consistency, documents, meta, neighbours, vectors
from shared.store.portable.aggregates import Aggregate, PortableDocuments, PortableNeighbours
from shared.store.portable.atoms import outdate as outdate_atoms
from shared.store.portable.documents import filter_sql, row_values
from shared.store.postgres import fulltext
from shared.store.postgres.connection import PgConnection, PgDatabase
from shared.store.postgres.graph import graph_delete_for_memory

INSERT_SQL = documents.INSERT_SQL + " RETURNING id"
# Tables whose dead rows may hold a deleted memory's words until VACUUM reclaims them.
_DELETED_WORDS_TABLES = ("documents", "memory_atoms", "graph_entries", "graph_nodes", "vectors",
                         "memory_context", *fulltext.TABLES)


def _index_row(tx: PgConnection, memory_id: int, tokens: str, context: str, fields: MemoryFields) -> None:
    fulltext.add_row(tx.raw, "documents", memory_id,
                     (tokens, context, scope_tokens(fields.persona_id, fields.session_id)),
                     fields.persona_id, fields.session_id)


def insert(tx: PgConnection, text: str, tokens: str, fields: MemoryFields, now: float,
           context: str = "") -> int:
    memory_id = tx.execute(INSERT_SQL, (*row_values(text, fields), now, now)).fetchone()[0]
    _index_row(tx, memory_id, tokens, context, fields)
    meta.bump_epoch(tx)
    return memory_id


def update(tx: PgConnection, memory_id: int, text: str, tokens: str, fields: MemoryFields,
           now: float, context: str = "") -> None:
    """As documents.update, the graph's search rows removed from fulltext's table."""
    before = documents.derived_for(tx, memory_id)
    tx.execute(documents.UPDATE_SQL, (*row_values(text, fields), now, memory_id))
    fulltext.remove_rows(tx.raw, "documents", [memory_id])
    _index_row(tx, memory_id, tokens, context, fields)
    atoms_outdated, graph_outdated = outdated(before, text, fields)
    if atoms_outdated:
        outdate_atoms(tx, memory_id)
    if graph_outdated:
        graph_delete_for_memory(tx, memory_id)
        vectors.delete_for_memory(tx, memory_id, now, kind="graph_entry")
    meta.bump_epoch(tx)


def delete(tx: PgConnection, memory_id: int) -> dict[str, int]:
    receipt = {"documents_fts": fulltext.remove_rows(tx.raw, "documents", [memory_id]),
               "documents": tx.execute("DELETE FROM documents WHERE id = ?", (memory_id,)).rowcount}
    meta.bump_epoch(tx)
    return receipt


def add_fts_row(tx: PgConnection, memory_id: int, tokens: str, context: str, fields: MemoryFields) -> None:
    _index_row(tx, memory_id, tokens, context, fields)
    meta.bump_epoch(tx)


def set_context(tx: PgConnection, memory_id: int, context: str) -> None:
    fulltext.set_column(tx.raw, "documents", memory_id, 1, context)
    meta.bump_epoch(tx)


def get_many(conn: PgConnection, ids: Sequence[int]) -> dict[int, Document]:
    if not ids:
        return {}
    rows = conn.sql("SELECT * FROM documents WHERE id = ANY(%s) ORDER BY id", (list(ids),)).fetchall()
    return {row["id"]: documents.row_to_document(row) for row in rows}


def has_fts_row(conn: PgConnection, memory_id: int) -> bool:
    return fulltext.has_row(conn.raw, "documents", memory_id)


def missing_fts(conn: PgConnection) -> list[int]:
    ids = [r[0] for r in conn.sql("SELECT id FROM documents ORDER BY id")]
    present = fulltext.row_ids_among(conn.raw, "documents", ids) if ids else set[int]()
    return [i for i in ids if i not in present]


def bm25(conn: PgConnection, terms: Sequence[str], scope: DocumentFilter, limit: int,
         context_weight: float = 1.0) -> list[tuple[int, float]]:
    """(id, raw score) best first, as SQLite's -bm25(documents_fts, 1.0, context_weight, 0.0)
    ranks them within the scope's persona / session."""
    terms = list(terms)[:MAX_QUERY_TERMS]
    if not terms:
        return []
    personas = None if scope.persona_id is None else [scope.persona_id]
    ranked, ranked_params = fulltext.ranked("documents", terms, (1.0, context_weight, 0.0),
                                            personas, scope.session_id)
    where, params = filter_sql(scope, alias="d")
    statement = psycopg.sql.SQL(
        "SELECT d.id, s.raw FROM ({ranked}) s JOIN documents d ON d.id = s.row_id"
        f" WHERE {{where}} ORDER BY {fulltext.BEST_FIRST} LIMIT %s").format(
            # psycopg's stubs want a LiteralString; this SQL is put together from our own constants.
            ranked=fulltext.best_first(ranked), where=psycopg.sql.SQL(where.replace("?", "%s")))  # pyright: ignore[reportArgumentType]
    return [(r[0], r[1]) for r in conn.sql(statement, [*ranked_params, *params, limit])]


def terms_of(conn: PgConnection, ids: Sequence[int]) -> dict[int, list[str]]:
    if not ids:
        return {}
    return {row_id: columns[0].split()
            for row_id, columns in fulltext.stored_columns(conn.raw, "documents", ids).items()}


def filter_ids(conn: PgConnection, ids: Sequence[int], scope: DocumentFilter) -> set[int]:
    if not ids:
        return set()
    where, params = filter_sql(scope, alias="documents")
    return {r[0] for r in conn.sql(
        psycopg.sql.SQL("SELECT id FROM documents WHERE id = ANY(%s) AND {where}").format(
            # psycopg's stubs want a LiteralString; this SQL is put together from our own constants.
            where=psycopg.sql.SQL(where.replace("?", "%s"))), [list(ids), *params])}  # pyright: ignore[reportArgumentType]


def texts_of(conn: PgConnection, ids: Sequence[int]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {i: [] for i in ids}
    if not ids:
        return out
    for memory_id, text in conn.sql(
            f"SELECT c.memory_id, d.text FROM memory_context c {neighbours.IN_CONVERSATION}"
            " WHERE c.memory_id = ANY(%s) ORDER BY c.memory_id, c.position", (list(ids),)):
        out[memory_id].append(text)
    return out


def table_counts(db: PgDatabase) -> dict[str, int]:
    """Rows per table in one consistent read, named as on SQLite (the full-text indexes as
    its FTS5 tables)."""
    with db.snapshot() as conn:
        counts = {table: conn.sql(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                  for table in ("documents", "memory_stages", "memory_atoms", "graph_nodes",
                                "graph_edges", "graph_entries", "vectors")}
        for index in ("documents", "atoms", "graph_entries"):
            counts[f"{index}_fts"] = fulltext.rows_count(conn.raw, index)
    return counts


def missing_outputs(conn: PgConnection, model: str) -> dict[str, list[int]]:
    """As consistency.missing_outputs; an atom's search row is looked up in fulltext's table."""
    checks = {name: sql for name, (_, sql) in consistency.CHECKS.items()}
    found = {name: sorted({r[0] for r in conn.sql(sql.replace(":model", "%(model)s"), {"model": model})})
             for name, sql in checks.items()}
    atoms = conn.sql("SELECT id, memory_id FROM memory_atoms WHERE state IN"
                     " ('active', 'expired', 'superseded')").fetchall()
    indexed = fulltext.row_ids_among(conn.raw, "atoms", [a[0] for a in atoms]) if atoms else set[int]()
    found[consistency.ATOM_SEARCH_ROWS] = sorted({m for a, m in atoms if a not in indexed})
    return found


def vacuum_deleted(db: PgDatabase) -> bool:
    """After a delete's commit (and in the worker's hourly housekeeping): VACUUM the tables
    that held the memory, so its rows' space is reclaimed rather than left as dead tuples.
    PostgreSQL does not zero freed space: bytes stay in data files and WAL until overwritten
    (README, team deployment). Without ANALYZE, which would cost every delete's reply many
    times as much."""
    return _run_maintenance(db, psycopg.sql.SQL("VACUUM {}").format(
        psycopg.sql.SQL(", ").join(psycopg.sql.Identifier(t) for t in _DELETED_WORDS_TABLES)))


def vacuum_analyze(db: PgDatabase) -> bool:
    """The worker's hourly housekeeping: VACUUM (ANALYZE) of the whole database, so the
    planner's statistics follow the store's growth even where autovacuum is off (a store
    grown without them plans recall for the tables it once was)."""
    return _run_maintenance(db, psycopg.sql.SQL("VACUUM (ANALYZE)"))


def _run_maintenance(db: PgDatabase, statement: psycopg.sql.Composable) -> bool:
    try:
        with db.autocommit() as conn:
            conn.sql(statement)
        return True
    except Exception:  # never raises (interface): the next run or autovacuum does it
        return False


class PostgresDocuments(PortableDocuments):
    def insert(self, text: str, tokens: str, fields: MemoryFields, now: float, context: str = "") -> int:
        return self._run.write(insert, text, tokens, fields, now, context)

    def update(self, memory_id: int, text: str, tokens: str, fields: MemoryFields, now: float,
               context: str = "") -> None:
        return self._run.write(update, memory_id, text, tokens, fields, now, context)

    def delete(self, memory_id: int) -> dict[str, int]:
        return self._run.write(delete, memory_id)

    def add_fts_row(self, memory_id: int, tokens: str, context: str, fields: MemoryFields) -> None:
        return self._run.write(add_fts_row, memory_id, tokens, context, fields)

    def set_context(self, memory_id: int, context: str) -> None:
        return self._run.write(set_context, memory_id, context)

    def get_many(self, ids: Sequence[int]) -> dict[int, Document]:
        return self._run.read(get_many, ids)

    def has_fts_row(self, memory_id: int) -> bool:
        return self._run.read(has_fts_row, memory_id)

    def missing_fts(self) -> list[int]:
        return self._run.read(missing_fts)

    def bm25(self, terms: Sequence[str], scope: DocumentFilter, limit: int,
             context_weight: float = 1.0) -> list[tuple[int, float]]:
        return self._run.read(bm25, terms, scope, limit, context_weight)

    def terms_of(self, ids: Sequence[int]) -> dict[int, list[str]]:
        return self._run.read(terms_of, ids)

    def filter_ids(self, ids: Sequence[int], scope: DocumentFilter) -> set[int]:
        return self._run.read(filter_ids, ids, scope)


class PostgresNeighbours(PortableNeighbours):
    def texts_of(self, ids: Sequence[int]) -> dict[int, list[str]]:
        return self._run.read(texts_of, ids)


class PostgresConsistency(Aggregate):
    def missing_outputs(self, model: str) -> dict[str, list[int]]:
        return self._run.read(missing_outputs, model)

    def redo_missing(self, missing: dict[str, list[int]], now: float) -> int:
        return self._run.write(_redo_missing, missing, now)

    def table_counts(self) -> dict[str, int]:
        return self._run.whole(table_counts)


def _redo_missing(conn: PgConnection, missing: dict[str, list[int]], now: float) -> int:
    return consistency.redo_missing(conn, missing, now)


class PostgresFullText(Aggregate):
    """Deleted rows leave the full-text tables inside the deleting write (the rows are the
    index): nothing to scrub; VACUUM after the commit reclaims their space."""

    def scrub_terms(self, tables: Iterable[str]) -> None:
        unknown = [t for t in tables if t not in FTS_TABLES]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not one of the full-text tables {FTS_TABLES}")

    def scrubs_in_place(self) -> bool:
        return True
