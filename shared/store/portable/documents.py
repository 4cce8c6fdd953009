"""Documents: the memories themselves, in SQL both engines run, and the statements and row
helpers both engines' writes and reads share (INSERT_SQL, UPDATE_SQL, row_values,
filter_sql, row_to_document). The BM25 rows are each engine's own (sqlite/documents.py,
postgres/documents.py). Writes take the caller's transaction: the memory
service (shared/memories.py) composes them with the other aggregates' writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from shared.errors import MemoryNotFound
from shared.store.model.documents import Document, DocumentFilter, History, MemoryFields, content_hash, epoch
from shared.store.portable import meta
from shared.store.portable.connection import Connection

_JSON_FIELDS = ("topics", "participants", "key_facts")


# -- writes (inside the caller's transaction) ----------------------------------------------


def derived_for(tx: Connection, memory_id: int) -> tuple[Any, ...] | None:
    """(persona_id, session_id, content_hash): what a memory's derived rows are made for; None
    when it does not exist. Portable SQL."""
    return tx.execute("SELECT persona_id, session_id, content_hash FROM documents WHERE id = ?",
                      (memory_id,)).fetchone()


def set_history(tx: Connection, memory_id: int, history: History) -> None:
    """Give a new document the times, archived flag and accesses it had where it came from."""
    tx.execute("UPDATE documents SET create_time = ?, update_time = ?, archived = ?, access_count = ?,"
               " last_access_time = ? WHERE id = ?",
               (history.create_time, history.update_time, int(history.archived), history.access_count,
                history.last_access_time, memory_id))
    meta.bump_epoch(tx)


def set_pinned(tx: Connection, memory_id: int, pinned: bool, now: float) -> None:
    tx.execute("UPDATE documents SET pinned = ?, update_time = ? WHERE id = ?", (int(pinned), now, memory_id))
    meta.bump_epoch(tx)


def touch(tx: Connection, ids: Sequence[int], now: float) -> None:
    """Access reinforcement: recalled memories count one more access, dated now.
    Not a change of content: the recall cache stays valid."""
    tx.executemany("UPDATE documents SET access_count = access_count + 1, last_access_time = ?"
                   " WHERE id = ?", [(now, i) for i in ids])


def decay_inputs(conn: Connection) -> list[tuple[int, float, float, float | None]]:
    """(id, importance, access_count, last_access_time) of every memory that decays (unpinned)."""
    return conn.execute("SELECT id, importance, access_count, last_access_time FROM documents"
                        " WHERE pinned = 0").fetchall()


def set_decayed(tx: Connection, rows: Sequence[tuple[float, float, int]]) -> None:
    """Store (importance, access_count, id) triples computed by the decay rule."""
    tx.executemany("UPDATE documents SET importance = ?, access_count = ? WHERE id = ?", rows)
    if rows:
        meta.bump_epoch(tx)


def archive_stale(tx: Connection, created_before: float, importance_below: float) -> list[int]:
    """Archive unpinned memories older than a time and less important than a level."""
    ids = [r[0] for r in tx.execute(
        "SELECT id FROM documents WHERE archived = 0 AND pinned = 0 AND create_time < ?"
        " AND importance < ?", (created_before, importance_below))]
    tx.executemany("UPDATE documents SET archived = 1 WHERE id = ?", [(i,) for i in ids])
    if ids:
        meta.bump_epoch(tx)
    return ids


def get(conn: Connection, memory_id: int) -> Document:
    row = conn.execute("SELECT * FROM documents WHERE id = ?", (memory_id,)).fetchone()
    if row is None:
        raise MemoryNotFound(memory_id)
    return row_to_document(row)


def find_by_source(conn: Connection, source_hash: str) -> int | None:
    """The id of the memory made from this source (a transcript, an import row), if any."""
    row = conn.execute("SELECT id FROM documents WHERE source_hash = ? LIMIT 1", (source_hash,)).fetchone()
    return None if row is None else row[0]


# -- reads ----------------------------------------------------------------------------------


def list_page(conn: Connection, limit: int, offset: int,
              scope: DocumentFilter) -> tuple[list[Document], int]:
    """A page of documents, newest first, and the total matching the filter (two reads: call
    inside one transaction for a total that matches the page)."""
    where, params = filter_sql(scope, alias="documents")
    total = conn.execute(f"SELECT COUNT(*) FROM documents WHERE {where}", params).fetchone()[0]
    rows = conn.execute(f"SELECT * FROM documents WHERE {where} ORDER BY id DESC LIMIT ? OFFSET ?",
                        (*params, limit, offset)).fetchall()
    return [row_to_document(r) for r in rows], total


def ids_in_scope(conn: Connection, scope: DocumentFilter) -> list[int]:
    """Every document id the filter admits (for restricting a vector search)."""
    where, params = filter_sql(scope, alias="documents")
    return [r[0] for r in conn.execute(f"SELECT id FROM documents WHERE {where}", params)]


def count(conn: Connection) -> int:
    return conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]


def count_in(conn: Connection, scope: DocumentFilter) -> int:
    """How many documents the filter admits."""
    where, params = filter_sql(scope, alias="documents")
    return conn.execute(f"SELECT COUNT(*) FROM documents WHERE {where}", params).fetchone()[0]


def counts(conn: Connection) -> dict[str, int]:
    """Memories: total, pinned, archived, active."""
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(pinned), 0), COALESCE(SUM(archived), 0) FROM documents").fetchone()
    return {"total": row[0], "pinned": row[1], "archived": row[2], "active": row[0] - row[2]}


# The columns a caller's write sets, in the order row_values gives them.
_WRITE_COLUMNS = ("text", "content_hash", "topics", "participants", "key_facts", "sentiment",
                  "importance", "pinned", "session_id", "persona_id", "original_time",
                  "original_ts", "persona_summary", "source_hash")
INSERT_SQL = (f"INSERT INTO documents ({', '.join(_WRITE_COLUMNS)}, create_time, update_time)"
               f" VALUES ({', '.join('?' * (len(_WRITE_COLUMNS) + 2))})")
UPDATE_SQL = (f"UPDATE documents SET {', '.join(c + ' = ?' for c in _WRITE_COLUMNS)},"
               " update_time = ? WHERE id = ?")


def row_values(text: str, fields: MemoryFields) -> tuple[Any, ...]:
    """Values for _WRITE_COLUMNS."""
    lists = (json.dumps(list(getattr(fields, name)), ensure_ascii=False) for name in _JSON_FIELDS)
    return (text, content_hash(text), *lists, fields.sentiment, fields.importance,
            int(fields.pinned), fields.session_id, fields.persona_id, _iso(fields.original_time),
            epoch(fields.original_time), fields.persona_summary, fields.source_hash)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def filter_sql(scope: DocumentFilter, alias: str) -> tuple[str, tuple[str | float, ...]]:
    clauses: list[str] = ["1 = 1"]
    params: list[str | float] = []
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


def row_to_document(row: Any) -> Document:
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


def list_by_state(conn: Connection, scope: DocumentFilter, state: str, limit: int,
                  offset: int, count_cap: int) -> tuple[list[Document], int]:
    """A page of documents newest first (the panel's list) and how many match, counted up to
    count_cap so a count never reads a whole 100k table. state: active (not archived), pinned,
    archived or all; scope.include_archived is ignored (the state says it)."""
    where, params = filter_sql(DocumentFilter(scope.session_id, scope.persona_id,
                                               include_archived=state != "active",
                                               since=scope.since, until=scope.until), alias="documents")
    where += {"pinned": " AND documents.pinned = 1", "archived": " AND documents.archived = 1"}.get(state, "")
    total = conn.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM documents WHERE {where} LIMIT ?) AS page",
                         (*params, count_cap)).fetchone()[0]
    rows = conn.execute(f"SELECT * FROM documents WHERE {where} ORDER BY id DESC LIMIT ? OFFSET ?",
                        (*params, limit, offset)).fetchall()
    return [row_to_document(r) for r in rows], total


def persona_ids(conn: Connection, limit: int) -> list[str]:
    """Distinct persona ids, sorted (the panel's persona filter), up to limit."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT persona_id FROM documents WHERE persona_id IS NOT NULL"
        " ORDER BY persona_id LIMIT ?", (limit,))]
