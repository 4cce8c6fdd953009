"""Documents: the memories themselves, and their BM25 (FTS5) rows.

A document and its FTS row are always written in the same transaction, so a memory that was
acknowledged is searchable by BM25 at once. Deleting a document cascades, with a receipt,
over every table that refers to it.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Callable, Sequence

from shared.errors import MemoryNotFound
from shared.store import atoms, graph, runtime, stages, vectors
from shared.store.db import Database
from shared.text.segment import Segmenter

DDL = [
    """
    CREATE TABLE documents (
        id INTEGER PRIMARY KEY,
        text TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        topics TEXT NOT NULL DEFAULT '[]',
        participants TEXT NOT NULL DEFAULT '[]',
        key_facts TEXT NOT NULL DEFAULT '[]',
        sentiment TEXT NOT NULL DEFAULT 'neutral'
            CHECK (sentiment IN ('positive', 'neutral', 'negative')),
        importance REAL NOT NULL DEFAULT 0.5 CHECK (importance >= 0.0 AND importance <= 1.0),
        pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
        archived INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
        session_id TEXT,
        persona_id TEXT,
        original_time TEXT,
        original_ts REAL,
        persona_summary TEXT,
        access_count INTEGER NOT NULL DEFAULT 0,
        last_access_time REAL,
        create_time REAL NOT NULL,
        update_time REAL NOT NULL
    )
    """,
    "CREATE INDEX documents_persona ON documents (persona_id, id)",
    "CREATE INDEX documents_session ON documents (session_id, id)",
    "CREATE INDEX documents_original_ts ON documents (original_ts)",
    # Terms are segmented by jieba before they get here; porter stems English ones.
    "CREATE VIRTUAL TABLE documents_fts USING fts5(tokens, tokenize = 'porter unicode61 remove_diacritics 2')",
]

_TIME_MARKER = re.compile(r"^\s*\[\d{4}-\d{2}-\d{2}[^\]\n]{0,40}\]")
_JSON_FIELDS = ("topics", "participants", "key_facts")


@dataclass(frozen=True)
class MemoryFields:
    """What a caller may set on a memory besides its content (already validated)."""

    topics: tuple[str, ...] = ()
    participants: tuple[str, ...] = ()
    key_facts: tuple[str, ...] = ()
    sentiment: str = "neutral"
    importance: float = 0.5
    pinned: bool = False
    session_id: str | None = None
    persona_id: str | None = None
    original_time: datetime | None = None
    persona_summary: str | None = None


@dataclass(frozen=True)
class Document:
    id: int
    text: str
    content_hash: str
    fields: MemoryFields
    archived: bool
    access_count: int
    last_access_time: float | None
    create_time: float
    update_time: float


@dataclass(frozen=True)
class DocumentFilter:
    """Exact-match scoping for list and search; times are epoch seconds on original_time."""

    session_id: str | None = None
    persona_id: str | None = None
    include_archived: bool = False
    since: float | None = None
    until: float | None = None


def time_marker(moment: datetime) -> str:
    """The '[YYYY-MM-DD HH:MM]' marker put in front of a memory's text."""
    if (moment.hour, moment.minute, moment.second) == (0, 0, 0):
        return f"[{moment:%Y-%m-%d}]"
    return f"[{moment:%Y-%m-%d %H:%M}]"


def marked_text(content: str, original_time: datetime | None) -> str:
    """The stored text: content with its original-time marker, unless it already has one."""
    content = content.strip()
    if original_time is None or _TIME_MARKER.match(content):
        return content
    return f"{time_marker(original_time)} {content}"


def unmarked(text: str) -> str:
    """Text without its leading original-time marker (what gets embedded)."""
    return _TIME_MARKER.sub("", text, count=1).strip()


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def epoch(moment: datetime | None) -> float | None:
    """Seconds since the epoch; a naive time is taken as UTC."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


class DocumentStore:
    """Reads and writes documents with their FTS rows; deletes cascade with a receipt."""

    def __init__(self, db: Database, segmenter: Segmenter, clock: Callable[[], float] = time.time):
        self.db = db
        self.segmenter = segmenter
        self.clock = clock

    # -- writes ---------------------------------------------------------------------------

    def insert(self, content: str, fields: MemoryFields) -> Document:
        """Store a new memory and its BM25 row in one transaction."""
        prepared = self._prepare(content, fields)
        with self.db.write() as tx:
            return self._get(tx, self._insert(tx, prepared, fields))

    def insert_many(self, items: Sequence[tuple[str, MemoryFields]]) -> list[int]:
        """Store many memories in one transaction (imports, seeding); return their ids."""
        prepared = [(self._prepare(content, fields), fields) for content, fields in items]
        with self.db.write() as tx:
            return [self._insert(tx, text_tokens, fields) for text_tokens, fields in prepared]

    def _prepare(self, content: str, fields: MemoryFields) -> tuple[str, str]:
        """Stored text and FTS tokens, computed before the write lock is taken."""
        text = marked_text(content, fields.original_time)
        return text, self._index_tokens(text, fields)

    def _insert(self, tx: sqlite3.Connection, prepared: tuple[str, str], fields: MemoryFields) -> int:
        text, tokens = prepared
        now = self.clock()
        cur = tx.execute(_INSERT_SQL, (*_row_values(text, fields), now, now))
        tx.execute("INSERT INTO documents_fts (rowid, tokens) VALUES (?, ?)", (cur.lastrowid, tokens))
        stages.create_for_memory(tx, cur.lastrowid, content_hash(text), now)
        runtime.bump_epoch(tx)
        return cur.lastrowid

    def update(self, memory_id: int, content: str | None, changes: dict) -> Document:
        """Replace content and/or some fields, re-indexing in the same transaction."""
        with self.db.write() as tx:
            old = self._get(tx, memory_id)
            fields = replace(old.fields, **changes)
            if content is not None:
                text = marked_text(content, fields.original_time)
            elif "original_time" in changes:
                text = marked_text(unmarked(old.text), fields.original_time)
            else:
                text = old.text
            now = self.clock()
            tx.execute(_UPDATE_SQL, (*_row_values(text, fields), now, memory_id))
            if text != old.text:
                # Derived output of the old text is stale: drop the vector, redo every stage.
                vectors.delete_for_memory(tx, memory_id, now)
                stages.reset_for_memory(tx, memory_id, content_hash(text), now)
            tx.execute("DELETE FROM documents_fts WHERE rowid = ?", (memory_id,))
            tx.execute("INSERT INTO documents_fts (rowid, tokens) VALUES (?, ?)",
                       (memory_id, self._index_tokens(text, fields)))
            runtime.bump_epoch(tx)
            return self._get(tx, memory_id)

    def set_pinned(self, memory_id: int, pinned: bool) -> Document:
        with self.db.write() as tx:
            self._get(tx, memory_id)
            tx.execute("UPDATE documents SET pinned = ?, update_time = ? WHERE id = ?",
                       (int(pinned), self.clock(), memory_id))
            runtime.bump_epoch(tx)
            return self._get(tx, memory_id)

    def delete(self, memory_id: int) -> dict[str, int]:
        """Delete a memory and everything derived from it; return {table: rows removed}."""
        with self.db.write() as tx:
            self._get(tx, memory_id)
            receipt: dict[str, int] = {}
            now = self.clock()
            for owner in (vectors, graph, atoms, stages):
                receipt.update(owner.delete_for_memory(tx, memory_id, now))
            receipt["documents_fts"] = tx.execute(
                "DELETE FROM documents_fts WHERE rowid = ?", (memory_id,)).rowcount
            receipt["documents"] = tx.execute(
                "DELETE FROM documents WHERE id = ?", (memory_id,)).rowcount
            runtime.bump_epoch(tx)
            return receipt

    # -- reads ----------------------------------------------------------------------------

    def get(self, memory_id: int) -> Document:
        return self._get(self.db.connection(), memory_id)

    def get_many(self, ids: Sequence[int]) -> dict[int, Document]:
        """Documents by id (missing ids are left out)."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.db.connection().execute(
            f"SELECT * FROM documents WHERE id IN ({marks})", tuple(ids)).fetchall()
        return {row["id"]: _row_to_document(row) for row in rows}

    def list(self, limit: int, offset: int, scope: DocumentFilter) -> tuple[list[Document], int]:
        """A page of documents, newest first, and the total matching the filter."""
        where, params = _filter_sql(scope, alias="documents")
        with self.db.snapshot() as conn:
            total = conn.execute(f"SELECT COUNT(*) FROM documents WHERE {where}", params).fetchone()[0]
            rows = conn.execute(
                f"SELECT * FROM documents WHERE {where} ORDER BY id DESC LIMIT ? OFFSET ?",
                (*params, limit, offset)).fetchall()
        return [_row_to_document(r) for r in rows], total

    def bm25(self, match: str, scope: DocumentFilter, limit: int) -> list[tuple[int, float]]:
        """(id, raw score) best first for an FTS5 MATCH expression; raw = -bm25(), higher is better."""
        where, params = _filter_sql(scope, alias="d")
        rows = self.db.connection().execute(
            "SELECT d.id, -bm25(documents_fts) AS raw FROM documents_fts"
            " JOIN documents d ON d.id = documents_fts.rowid"
            f" WHERE documents_fts MATCH ? AND {where} ORDER BY raw DESC LIMIT ?",
            (match, *params, limit)).fetchall()
        return [(r[0], r[1]) for r in rows]

    def touch(self, ids: Sequence[int], now: float) -> None:
        """Access reinforcement: recalled memories count one more access, dated now.
        Not a change of content: the recall cache stays valid."""
        if ids:
            with self.db.write() as tx:
                tx.executemany("UPDATE documents SET access_count = access_count + 1,"
                               " last_access_time = ? WHERE id = ?", [(now, i) for i in ids])

    def terms_of(self, ids: Sequence[int]) -> dict[int, list[str]]:
        """The indexed terms of documents (as stored in the FTS table: no re-segmenting)."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        return {r[0]: r[1].split() for r in self.db.connection().execute(
            f"SELECT rowid, tokens FROM documents_fts WHERE rowid IN ({marks})", tuple(ids))}

    # -- forgetting --------------------------------------------------------------------------

    def decay_importance(self, days: int, rate: float, window_s: float, multiplier: float,
                         now: float) -> int:
        """Apply `days` days of importance decay to every unpinned memory; return how many.

        Per day: recent = access_count if accessed within the window, else 0;
        importance = max(0.05, importance x (1 - rate x max(0.3, 1 - 0.1 x min(recent, 10))));
        then access_count x multiplier."""
        if days <= 0:
            return 0
        with self.db.write() as tx:
            changed = 0
            for _ in range(days):
                changed = tx.execute(
                    "UPDATE documents SET importance = MAX(0.05, importance * (1 - ? * MAX(0.3, 1 - 0.1 *"
                    " MIN(CASE WHEN last_access_time >= ? THEN access_count ELSE 0 END, 10)))),"
                    " access_count = access_count * ? WHERE pinned = 0",
                    (rate, now - window_s, multiplier)).rowcount
            runtime.bump_epoch(tx)
        return changed

    def archive_stale(self, created_before: float, importance_below: float) -> list[int]:
        """Archive unpinned memories older than a time and less important than a level."""
        with self.db.write() as tx:
            ids = [r[0] for r in tx.execute(
                "SELECT id FROM documents WHERE archived = 0 AND pinned = 0 AND create_time < ?"
                " AND importance < ?", (created_before, importance_below))]
            tx.executemany("UPDATE documents SET archived = 1 WHERE id = ?", [(i,) for i in ids])
            if ids:
                runtime.bump_epoch(tx)
        return ids

    def backfill_fts(self) -> int:
        """Give every document without a BM25 row its row back (no API needed); return how many."""
        missing = self.db.connection().execute(
            "SELECT id FROM documents WHERE id NOT IN (SELECT rowid FROM documents_fts)").fetchall()
        if not missing:
            return 0
        docs = self.get_many([r[0] for r in missing])
        with self.db.write() as tx:
            for doc in docs.values():
                tx.execute("INSERT INTO documents_fts (rowid, tokens) VALUES (?, ?)",
                           (doc.id, self._index_tokens(doc.text, doc.fields)))
            runtime.bump_epoch(tx)
        return len(docs)

    def ids_in_scope(self, scope: DocumentFilter) -> list[int]:
        """Every document id the filter admits (for restricting a vector search)."""
        where, params = _filter_sql(scope, alias="documents")
        return [r[0] for r in self.db.connection().execute(
            f"SELECT id FROM documents WHERE {where}", params)]

    def filter_ids(self, ids: Sequence[int], scope: DocumentFilter) -> set[int]:
        """The subset of ids that exist and that the filter admits."""
        if not ids:
            return set()
        where, params = _filter_sql(scope, alias="documents")
        marks = ",".join("?" * len(ids))
        return {r[0] for r in self.db.connection().execute(
            f"SELECT id FROM documents WHERE id IN ({marks}) AND {where}", (*ids, *params))}

    def stats(self) -> dict[str, int]:
        row = self.db.connection().execute(
            "SELECT COUNT(*), COALESCE(SUM(pinned), 0), COALESCE(SUM(archived), 0) FROM documents"
        ).fetchone()
        return {"total": row[0], "pinned": row[1], "archived": row[2], "active": row[0] - row[2]}

    def table_counts(self) -> dict[str, int]:
        """Rows per table, for memory_stats and consistency checks."""
        with self.db.snapshot() as conn:
            counts = {
                "documents": conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0],
                "documents_fts": conn.execute("SELECT COUNT(*) FROM documents_fts").fetchone()[0],
            }
            for owner in (stages, atoms, graph, vectors):
                counts.update(owner.table_counts(conn))
        return counts

    # -- helpers --------------------------------------------------------------------------

    def _get(self, conn: sqlite3.Connection, memory_id: int) -> Document:
        row = conn.execute("SELECT * FROM documents WHERE id = ?", (memory_id,)).fetchone()
        if row is None:
            raise MemoryNotFound(memory_id)
        return _row_to_document(row)

    def _index_tokens(self, text: str, fields: MemoryFields) -> str:
        extra = [*fields.topics, fields.persona_summary or ""]
        extra += [fact for fact in fields.key_facts if fact.strip() not in text]
        return " ".join(self.segmenter.terms("\n".join([text, *extra])))



# The columns a caller's write sets, in the order _row_values gives them.
_WRITE_COLUMNS = ("text", "content_hash", "topics", "participants", "key_facts", "sentiment",
                  "importance", "pinned", "session_id", "persona_id", "original_time",
                  "original_ts", "persona_summary")
_INSERT_SQL = (f"INSERT INTO documents ({', '.join(_WRITE_COLUMNS)}, create_time, update_time)"
               f" VALUES ({', '.join('?' * (len(_WRITE_COLUMNS) + 2))})")
_UPDATE_SQL = (f"UPDATE documents SET {', '.join(c + ' = ?' for c in _WRITE_COLUMNS)},"
               " update_time = ? WHERE id = ?")


def _row_values(text: str, fields: MemoryFields) -> tuple:
    """Values for _WRITE_COLUMNS."""
    lists = (json.dumps(list(getattr(fields, name)), ensure_ascii=False) for name in _JSON_FIELDS)
    return (text, content_hash(text), *lists, fields.sentiment, fields.importance,
            int(fields.pinned), fields.session_id, fields.persona_id, _iso(fields.original_time),
            epoch(fields.original_time), fields.persona_summary)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _filter_sql(scope: DocumentFilter, alias: str) -> tuple[str, tuple]:
    clauses, params = ["1"], []
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
    )
    return Document(
        id=row["id"], text=row["text"], content_hash=row["content_hash"], fields=fields, archived=bool(row["archived"]),
        access_count=row["access_count"], last_access_time=row["last_access_time"],
        create_time=row["create_time"], update_time=row["update_time"])

