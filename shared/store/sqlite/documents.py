"""Documents on SQLite: the writes and reads that touch the FTS5 index (documents_fts) or pass
id lists through json_each. The rest of the documents SQL is portable (portable/documents.py).

A document and its FTS row are always written in the same transaction, so a memory that was
acknowledged is searchable by BM25 at once."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from shared.store.model.documents import Document, DocumentFilter, MemoryFields, outdated
from shared.store.model.fulltext import scope_tokens
from shared.store.portable import atoms, meta, vectors
from shared.store.portable.documents import INSERT_SQL, UPDATE_SQL, derived_for, filter_sql, row_to_document, row_values
from shared.store.sqlite import graph
from shared.store.sqlite.match import any_of, scoped


def insert(tx: sqlite3.Connection, text: str, tokens: str, fields: MemoryFields, now: float,
           context: str = "") -> int:
    """A new document and its BM25 row (its own terms, and its context's); returns its id."""
    cur = tx.execute(INSERT_SQL, (*row_values(text, fields), now, now))
    memory_id = cur.lastrowid
    assert memory_id is not None  # an INSERT's cursor has its row's id
    _add_fts(tx, memory_id, tokens, context, fields)
    meta.bump_epoch(tx)
    return memory_id


def update(tx: sqlite3.Connection, memory_id: int, text: str, tokens: str, fields: MemoryFields,
           now: float, context: str = "") -> None:
    """Replace a document's text and fields and re-index it; what was derived from it for
    another persona, session or text is outdated in the same transaction (outdated())."""
    before = derived_for(tx, memory_id)
    tx.execute(UPDATE_SQL, (*row_values(text, fields), now, memory_id))
    tx.execute("DELETE FROM documents_fts WHERE rowid = ?", (memory_id,))
    _add_fts(tx, memory_id, tokens, context, fields)
    atoms_outdated, graph_outdated = outdated(before, text, fields)
    if atoms_outdated:
        atoms.outdate(tx, memory_id)
    if graph_outdated:
        graph.delete_for_memory(tx, memory_id)
        vectors.delete_for_memory(tx, memory_id, now, kind="graph_entry")
    meta.bump_epoch(tx)


def delete(tx: sqlite3.Connection, memory_id: int) -> dict[str, int]:
    """Remove a document and its BM25 row; return {table: rows removed}."""
    receipt = {"documents_fts": tx.execute("DELETE FROM documents_fts WHERE rowid = ?", (memory_id,)).rowcount,
               "documents": tx.execute("DELETE FROM documents WHERE id = ?", (memory_id,)).rowcount}
    meta.bump_epoch(tx)
    return receipt


def add_fts_row(tx: sqlite3.Connection, memory_id: int, tokens: str, context: str,
                fields: MemoryFields) -> None:
    _add_fts(tx, memory_id, tokens, context, fields)
    meta.bump_epoch(tx)


def _add_fts(tx: sqlite3.Connection, memory_id: int, tokens: str, context: str,
             fields: MemoryFields) -> None:
    tx.execute("INSERT INTO documents_fts (rowid, tokens, context, scope) VALUES (?, ?, ?, ?)",
               (memory_id, tokens, context, scope_tokens(fields.persona_id, fields.session_id)))


def set_context(tx: sqlite3.Connection, memory_id: int, context: str) -> None:
    """Replace the context terms of a memory's BM25 row (a neighbour changed or left)."""
    tx.execute("UPDATE documents_fts SET context = ? WHERE rowid = ?", (context, memory_id))
    meta.bump_epoch(tx)


def get_many(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Document]:
    """Documents by id, in id order (missing ids are left out)."""
    if not ids:
        return {}
    rows = conn.execute("SELECT * FROM documents WHERE id IN (SELECT value FROM json_each(?))"
                        " ORDER BY id", (json.dumps(list(ids)),)).fetchall()
    return {row["id"]: row_to_document(row) for row in rows}


def has_fts_row(conn: sqlite3.Connection, memory_id: int) -> bool:
    return conn.execute("SELECT 1 FROM documents_fts WHERE rowid = ?", (memory_id,)).fetchone() is not None


def bm25(conn: sqlite3.Connection, terms: Sequence[str], scope: DocumentFilter, limit: int,
         context_weight: float = 1.0) -> list[tuple[int, float]]:
    """(id, raw score) best first for any of the terms; raw = -bm25(), higher is better.
    A term found in the context column counts context_weight times one in the text."""
    match = scoped(any_of(terms), "scope", scope.persona_id, scope.session_id)
    if match is None:
        return []
    where, params = filter_sql(scope, alias="d")
    rows = conn.execute(
        "SELECT d.id, -bm25(documents_fts, 1.0, ?, 0.0) AS raw FROM documents_fts"
        " JOIN documents d ON d.id = documents_fts.rowid"
        f" WHERE documents_fts MATCH ? AND {where} ORDER BY raw DESC LIMIT ?",
        (context_weight, match, *params, limit)).fetchall()
    return [(r[0], r[1]) for r in rows]


def terms_of(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, list[str]]:
    """The indexed terms of documents (as stored in the FTS table: no re-segmenting)."""
    if not ids:
        return {}
    return {r[0]: r[1].split() for r in conn.execute(
        "SELECT rowid, tokens FROM documents_fts WHERE rowid IN (SELECT value FROM json_each(?))",
        (json.dumps(list(ids)),))}


def missing_fts(conn: sqlite3.Connection) -> list[int]:
    """Ids of documents without a BM25 row."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM documents WHERE id NOT IN (SELECT rowid FROM documents_fts) ORDER BY id")]


def filter_ids(conn: sqlite3.Connection, ids: Sequence[int], scope: DocumentFilter) -> set[int]:
    """The subset of ids that exist and that the filter admits."""
    if not ids:
        return set()
    where, params = filter_sql(scope, alias="documents")
    return {r[0] for r in conn.execute(
        "SELECT id FROM documents WHERE id IN (SELECT value FROM json_each(?))"
        f" AND {where}", (json.dumps(list(ids)), *params))}


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {"documents": conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0],
            "documents_fts": conn.execute("SELECT COUNT(*) FROM documents_fts").fetchone()[0]}
