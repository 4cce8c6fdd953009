"""Documents: the memories themselves, and their BM25 (FTS5) rows.

A document and its FTS row are always written in the same transaction, so a memory that was
acknowledged is searchable by BM25 at once. Writes take the caller's transaction: the memory
service (shared/memories.py) composes them with the other aggregates' writes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from shared.errors import MemoryNotFound
from shared.store import atoms, graph, meta, vectors
from shared.store.model.documents import Document, DocumentFilter, History, MemoryFields, content_hash, epoch, outdated
from shared.store.model.fulltext import scope_tokens
from shared.store.sqlite.db import Database
from shared.store.sqlite.match import any_of, scoped

_JSON_FIELDS = ("topics", "participants", "key_facts")


# -- writes (inside the caller's transaction) ----------------------------------------------


def insert(tx: sqlite3.Connection, text: str, tokens: str, fields: MemoryFields, now: float,
           context: str = "") -> int:
    """A new document and its BM25 row (its own terms, and its context's); returns its id."""
    cur = tx.execute(_INSERT_SQL, (*_row_values(text, fields), now, now))
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
    tx.execute(_UPDATE_SQL, (*_row_values(text, fields), now, memory_id))
    tx.execute("DELETE FROM documents_fts WHERE rowid = ?", (memory_id,))
    _add_fts(tx, memory_id, tokens, context, fields)
    atoms_outdated, graph_outdated = outdated(before, text, fields)
    if atoms_outdated:
        atoms.outdate(tx, memory_id)
    if graph_outdated:
        graph.delete_for_memory(tx, memory_id)
        vectors.delete_for_memory(tx, memory_id, now, kind="graph_entry")
    meta.bump_epoch(tx)


def derived_for(tx, memory_id: int) -> tuple | None:
    """(persona_id, session_id, content_hash): what a memory's derived rows are made for; None
    when it does not exist. Portable SQL."""
    return tx.execute("SELECT persona_id, session_id, content_hash FROM documents WHERE id = ?",
                      (memory_id,)).fetchone()


def set_history(tx: sqlite3.Connection, memory_id: int, history: History) -> None:
    """Give a new document the times, archived flag and accesses it had where it came from."""
    tx.execute("UPDATE documents SET create_time = ?, update_time = ?, archived = ?, access_count = ?,"
               " last_access_time = ? WHERE id = ?",
               (history.create_time, history.update_time, int(history.archived), history.access_count,
                history.last_access_time, memory_id))
    meta.bump_epoch(tx)


def set_pinned(tx: sqlite3.Connection, memory_id: int, pinned: bool, now: float) -> None:
    tx.execute("UPDATE documents SET pinned = ?, update_time = ? WHERE id = ?", (int(pinned), now, memory_id))
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


def touch(tx: sqlite3.Connection, ids: Sequence[int], now: float) -> None:
    """Access reinforcement: recalled memories count one more access, dated now.
    Not a change of content: the recall cache stays valid."""
    tx.executemany("UPDATE documents SET access_count = access_count + 1, last_access_time = ?"
                   " WHERE id = ?", [(now, i) for i in ids])


def decay_inputs(conn: sqlite3.Connection) -> list[tuple[int, float, float, float | None]]:
    """(id, importance, access_count, last_access_time) of every memory that decays (unpinned)."""
    return conn.execute("SELECT id, importance, access_count, last_access_time FROM documents"
                        " WHERE pinned = 0").fetchall()


def set_decayed(tx: sqlite3.Connection, rows: Sequence[tuple[float, float, int]]) -> None:
    """Store (importance, access_count, id) triples computed by the decay rule."""
    tx.executemany("UPDATE documents SET importance = ?, access_count = ? WHERE id = ?", rows)
    if rows:
        meta.bump_epoch(tx)


def archive_stale(tx: sqlite3.Connection, created_before: float, importance_below: float) -> list[int]:
    """Archive unpinned memories older than a time and less important than a level."""
    ids = [r[0] for r in tx.execute(
        "SELECT id FROM documents WHERE archived = 0 AND pinned = 0 AND create_time < ?"
        " AND importance < ?", (created_before, importance_below))]
    tx.executemany("UPDATE documents SET archived = 1 WHERE id = ?", [(i,) for i in ids])
    if ids:
        meta.bump_epoch(tx)
    return ids


def get(conn: sqlite3.Connection, memory_id: int) -> Document:
    row = conn.execute("SELECT * FROM documents WHERE id = ?", (memory_id,)).fetchone()
    if row is None:
        raise MemoryNotFound(memory_id)
    return _row_to_document(row)


def get_many(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Document]:
    """Documents by id, in id order (missing ids are left out)."""
    if not ids:
        return {}
    rows = conn.execute("SELECT * FROM documents WHERE id IN (SELECT value FROM json_each(?))"
                        " ORDER BY id", (json.dumps(list(ids)),)).fetchall()
    return {row["id"]: _row_to_document(row) for row in rows}


def has_fts_row(conn: sqlite3.Connection, memory_id: int) -> bool:
    return conn.execute("SELECT 1 FROM documents_fts WHERE rowid = ?", (memory_id,)).fetchone() is not None


def find_by_source(conn: sqlite3.Connection, source_hash: str) -> int | None:
    """The id of the memory made from this source (a transcript, an import row), if any."""
    row = conn.execute("SELECT id FROM documents WHERE source_hash = ? LIMIT 1", (source_hash,)).fetchone()
    return None if row is None else row[0]


# -- reads ----------------------------------------------------------------------------------


class DocumentStore:
    """Reads documents (each call on this thread's connection)."""

    def __init__(self, db: Database):
        self.db = db

    def get(self, memory_id: int) -> Document:
        return get(self.db.connection(), memory_id)

    def get_many(self, ids: Sequence[int]) -> dict[int, Document]:
        """Documents by id (missing ids are left out)."""
        return get_many(self.db.connection(), ids)

    def list(self, limit: int, offset: int, scope: DocumentFilter) -> tuple[list[Document], int]:
        """A page of documents, newest first, and the total matching the filter."""
        with self.db.snapshot() as conn:
            return list_page(conn, limit, offset, scope)

    def bm25(self, terms: Sequence[str], scope: DocumentFilter, limit: int,
             context_weight: float = 1.0) -> list[tuple[int, float]]:
        return bm25(self.db.connection(), terms, scope, limit, context_weight)

    def terms_of(self, ids: Sequence[int]) -> dict[int, list[str]]:
        return terms_of(self.db.connection(), ids)

    def missing_fts(self) -> list[int]:
        return missing_fts(self.db.connection())

    def ids_in_scope(self, scope: DocumentFilter) -> list[int]:
        return ids_in_scope(self.db.connection(), scope)

    def filter_ids(self, ids: Sequence[int], scope: DocumentFilter) -> set[int]:
        return filter_ids(self.db.connection(), ids, scope)

    def count(self) -> int:
        return count(self.db.connection())

    def count_in(self, scope: DocumentFilter) -> int:
        return count_in(self.db.connection(), scope)

    def stats(self) -> dict[str, int]:
        return counts(self.db.connection())


def list_page(conn: sqlite3.Connection, limit: int, offset: int,
              scope: DocumentFilter) -> tuple[list[Document], int]:
    """A page of documents, newest first, and the total matching the filter (two reads: call
    inside one transaction for a total that matches the page)."""
    where, params = _filter_sql(scope, alias="documents")
    total = conn.execute(f"SELECT COUNT(*) FROM documents WHERE {where}", params).fetchone()[0]
    rows = conn.execute(f"SELECT * FROM documents WHERE {where} ORDER BY id DESC LIMIT ? OFFSET ?",
                        (*params, limit, offset)).fetchall()
    return [_row_to_document(r) for r in rows], total


def bm25(conn: sqlite3.Connection, terms: Sequence[str], scope: DocumentFilter, limit: int,
         context_weight: float = 1.0) -> list[tuple[int, float]]:
    """(id, raw score) best first for any of the terms; raw = -bm25(), higher is better.
    A term found in the context column counts context_weight times one in the text."""
    match = scoped(any_of(terms), "scope", scope.persona_id, scope.session_id)
    if match is None:
        return []
    where, params = _filter_sql(scope, alias="d")
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


def ids_in_scope(conn: sqlite3.Connection, scope: DocumentFilter) -> list[int]:
    """Every document id the filter admits (for restricting a vector search)."""
    where, params = _filter_sql(scope, alias="documents")
    return [r[0] for r in conn.execute(f"SELECT id FROM documents WHERE {where}", params)]


def filter_ids(conn: sqlite3.Connection, ids: Sequence[int], scope: DocumentFilter) -> set[int]:
    """The subset of ids that exist and that the filter admits."""
    if not ids:
        return set()
    where, params = _filter_sql(scope, alias="documents")
    return {r[0] for r in conn.execute(
        "SELECT id FROM documents WHERE id IN (SELECT value FROM json_each(?))"
        f" AND {where}", (json.dumps(list(ids)), *params))}


def count(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]


def count_in(conn: sqlite3.Connection, scope: DocumentFilter) -> int:
    """How many documents the filter admits."""
    where, params = _filter_sql(scope, alias="documents")
    return conn.execute(f"SELECT COUNT(*) FROM documents WHERE {where}", params).fetchone()[0]


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Memories: total, pinned, archived, active."""
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(pinned), 0), COALESCE(SUM(archived), 0) FROM documents").fetchone()
    return {"total": row[0], "pinned": row[1], "archived": row[2], "active": row[0] - row[2]}


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {"documents": conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0],
            "documents_fts": conn.execute("SELECT COUNT(*) FROM documents_fts").fetchone()[0]}


# The columns a caller's write sets, in the order _row_values gives them.
_WRITE_COLUMNS = ("text", "content_hash", "topics", "participants", "key_facts", "sentiment",
                  "importance", "pinned", "session_id", "persona_id", "original_time",
                  "original_ts", "persona_summary", "source_hash")
_INSERT_SQL = (f"INSERT INTO documents ({', '.join(_WRITE_COLUMNS)}, create_time, update_time)"
               f" VALUES ({', '.join('?' * (len(_WRITE_COLUMNS) + 2))})")
_UPDATE_SQL = (f"UPDATE documents SET {', '.join(c + ' = ?' for c in _WRITE_COLUMNS)},"
               " update_time = ? WHERE id = ?")


def _row_values(text: str, fields: MemoryFields) -> tuple:
    """Values for _WRITE_COLUMNS."""
    lists = (json.dumps(list(getattr(fields, name)), ensure_ascii=False) for name in _JSON_FIELDS)
    return (text, content_hash(text), *lists, fields.sentiment, fields.importance,
            int(fields.pinned), fields.session_id, fields.persona_id, _iso(fields.original_time),
            epoch(fields.original_time), fields.persona_summary, fields.source_hash)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _filter_sql(scope: DocumentFilter, alias: str) -> tuple[str, tuple]:
    clauses, params = ["1 = 1"], []
    for column in ("session_id", "persona_id"):
        value = getattr(scope, column)
        if value is not None:
            clauses.append(f"{alias}.{column} = ?")
            params.append(value)
    if not scope.include_archived:
        clauses.append(f"{alias}.archived = 0")
    if scope.since is not None:
        clauses.append(f"{alias}.original_ts >= ?")
        params.append(scope.since)
    if scope.until is not None:
        clauses.append(f"{alias}.original_ts <= ?")
        params.append(scope.until)
    return " AND ".join(clauses), tuple(params)


def _row_to_document(row: sqlite3.Row) -> Document:
    original = row["original_time"]
    fields = MemoryFields(
        topics=tuple(json.loads(row["topics"])),
        participants=tuple(json.loads(row["participants"])),
        key_facts=tuple(json.loads(row["key_facts"])),
        sentiment=row["sentiment"],
        importance=row["importance"],
        pinned=bool(row["pinned"]),
        session_id=row["session_id"],
        persona_id=row["persona_id"],
        original_time=datetime.fromisoformat(original) if original else None,
        persona_summary=row["persona_summary"],
        source_hash=row["source_hash"],
    )
    return Document(
        id=row["id"], text=row["text"], content_hash=row["content_hash"], fields=fields, archived=bool(row["archived"]),
        access_count=row["access_count"], last_access_time=row["last_access_time"],
        create_time=row["create_time"], update_time=row["update_time"])


def list_by_state(conn: sqlite3.Connection, scope: DocumentFilter, state: str, limit: int,
                  offset: int, count_cap: int) -> tuple[list[Document], int]:
    """A page of documents newest first (the panel's list) and how many match, counted up to
    count_cap so a count never reads a whole 100k table. state: active (not archived), pinned,
    archived or all; scope.include_archived is ignored (the state says it)."""
    where, params = _filter_sql(DocumentFilter(scope.session_id, scope.persona_id,
                                               include_archived=state != "active",
                                               since=scope.since, until=scope.until), alias="documents")
    where += {"pinned": " AND documents.pinned = 1", "archived": " AND documents.archived = 1"}.get(state, "")
    total = conn.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM documents WHERE {where} LIMIT ?) AS page",
                         (*params, count_cap)).fetchone()[0]
    rows = conn.execute(f"SELECT * FROM documents WHERE {where} ORDER BY id DESC LIMIT ? OFFSET ?",
                        (*params, limit, offset)).fetchall()
    return [_row_to_document(r) for r in rows], total


def persona_ids(conn: sqlite3.Connection, limit: int) -> list[str]:
    """Distinct persona ids, sorted (the panel's persona filter), up to limit."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT persona_id FROM documents WHERE persona_id IS NOT NULL"
        " ORDER BY persona_id LIMIT ?", (limit,))]
