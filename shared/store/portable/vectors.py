"""Embedding vectors: the truth for every vector space; FAISS indexes are derived from it.

Every write that touches vectors takes the next number of a change sequence (meta
'vector_seq'): upserted rows carry it, deletions leave a tombstone with it. A front that has
seen sequence N loads only what changed after N, so its in-memory index stays current at the
cost of one tiny read per recall.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from shared.store.model.documents import DocumentFilter
from shared.store.model.meta import VECTOR_TOMBSTONE_FLOOR
from shared.store.model.vectors import VectorRow, foreign_spaces_from, passage_of
from shared.store.portable import meta
from shared.store.portable.connection import BatchCursor, Connection
from shared.store.portable.documents import filter_sql


def next_seq(conn: Connection) -> int:
    """Take the next change number (call inside a write transaction)."""
    return meta.increment(conn, meta.VECTOR_SEQ)


def current_seq(conn: Connection) -> int:
    return int(meta.get(conn, meta.VECTOR_SEQ) or 0)


def upsert(conn: Connection, row: VectorRow, now: float) -> None:
    """Store one L2-normalised float32 vector, replacing any older one for the same owner."""
    vector = np.ascontiguousarray(row.vector, dtype=np.float32)
    conn.execute(
        "INSERT INTO vectors (kind, owner_id, memory_id, model, dim, vector, content_hash, seq, create_time)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kind, owner_id) DO UPDATE SET"
        " memory_id = excluded.memory_id, model = excluded.model, dim = excluded.dim,"
        " vector = excluded.vector, content_hash = excluded.content_hash, seq = excluded.seq,"
        " create_time = excluded.create_time",
        (row.kind, row.owner_id, row.memory_id, row.model, vector.shape[0], vector.tobytes(),
         row.content_hash, next_seq(conn), now))


def delete_for_memory(conn: Connection, memory_id: int, now: float,
                      kind: str | None = None) -> dict[str, int]:
    """Remove the vectors derived from a memory (all kinds, or one), leaving tombstones."""
    where, params = ("memory_id = ?", (memory_id,)) if kind is None else \
        ("memory_id = ? AND kind = ?", (memory_id, kind))
    owners = conn.execute(f"SELECT kind, owner_id FROM vectors WHERE {where}", params).fetchall()
    for owner_kind, owner_id in owners:
        conn.execute("INSERT INTO vector_tombstones (seq, kind, owner_id, create_time) VALUES (?, ?, ?, ?)",
                     (next_seq(conn), owner_kind, owner_id, now))
    conn.execute(f"DELETE FROM vectors WHERE {where}", params)
    return {"vectors": len(owners)}


def delete_owners(conn: Connection, kind: str, owner_ids: Sequence[int], now: float) -> int:
    """Remove some owners' vectors, leaving tombstones; return how many were removed."""
    removed = 0
    for owner_id in owner_ids:
        if conn.execute("DELETE FROM vectors WHERE kind = ? AND owner_id = ?", (kind, owner_id)).rowcount:
            conn.execute("INSERT INTO vector_tombstones (seq, kind, owner_id, create_time) VALUES (?, ?, ?, ?)",
                         (next_seq(conn), kind, owner_id, now))
            removed += 1
    return removed


def of_memory(conn: Connection, memory_id: int, model: str, content_hash: str) -> dict[int, np.ndarray]:
    """{passage number: vector} of one version of a memory in one model's space: 0 is the
    memory's own vector, n > 0 its passage n."""
    out: dict[int, np.ndarray] = {}
    for kind, owner_id, dim, blob in conn.execute(
            "SELECT kind, owner_id, dim, vector FROM vectors WHERE memory_id = ? AND kind IN ('document', 'passage')"
            " AND model = ? AND content_hash = ?", (memory_id, model, content_hash)).fetchall():
        number = 0 if kind == "document" else passage_of(owner_id)[1]
        out[number] = np.frombuffer(bytes(blob), dtype=np.float32, count=dim)
    return out


def batches(cursor: BatchCursor, dim: int, batch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(owner ids, vectors) from (owner_id, vector) rows, `batch` rows at a time."""
    while rows := cursor.fetchmany(batch):
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        # numpy's stubs leave part of reshape's overloads untyped.
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dim)  # pyright: ignore[reportUnknownMemberType]
        yield ids, matrix


def owners_in_scope(conn: Connection, kind: str, scope: DocumentFilter) -> list[int]:
    """The owners of `kind` whose memory the filter admits (for restricting a vector search)."""
    where, params = filter_sql(scope, alias="d")
    return [r[0] for r in conn.execute(
        f"SELECT v.owner_id FROM vectors v JOIN documents d ON d.id = v.memory_id WHERE v.kind = ? AND {where}",
        (kind, *params))]


def space_count(conn: Connection, kind: str, model: str, dim: int) -> int:
    return conn.execute("SELECT COUNT(*) FROM vectors WHERE kind = ? AND model = ? AND dim = ?",
                        (kind, model, dim)).fetchone()[0]


def stored_dim(conn: Connection, kind: str, model: str) -> int:
    """The dimension of stored vectors of this kind and model, or 0 if there are none."""
    row = conn.execute("SELECT dim FROM vectors WHERE kind = ? AND model = ? LIMIT 1", (kind, model)).fetchone()
    return row[0] if row else 0


def tombstone_floor(conn: Connection) -> int:
    """Tombstones at or below this sequence were pruned: a front older than it must rebuild."""
    return int(meta.get(conn, VECTOR_TOMBSTONE_FLOOR) or 0)


def prune_tombstones(conn: Connection, older_than: float) -> int:
    """Drop old tombstones and raise the floor so lagging fronts know to rebuild."""
    top = conn.execute("SELECT MAX(seq) FROM vector_tombstones WHERE create_time < ?", (older_than,)).fetchone()[0]
    if top is None:
        return 0
    meta.put(conn, VECTOR_TOMBSTONE_FLOOR, top)
    return conn.execute("DELETE FROM vector_tombstones WHERE seq <= ?", (top,)).rowcount


def space_figures(conn: Connection) -> list[tuple[str, str, int, int]]:
    """(kind, model, dim, count) for every stored vector space."""
    return conn.execute("SELECT kind, model, dim, COUNT(*) FROM vectors GROUP BY kind, model, dim").fetchall()


def documents_with_vector(conn: Connection, model: str, dim: int) -> int:
    """Live documents that have a vector in the given space."""
    return conn.execute(
        "SELECT COUNT(*) FROM vectors v JOIN documents d ON d.id = v.owner_id"
        " WHERE v.kind = 'document' AND v.model = ? AND v.dim = ?", (model, dim)).fetchone()[0]


def foreign_spaces(conn: Connection, model: str, dim: int) -> list[tuple[str, str, int, int]]:
    """Stored vector spaces other than (model, dim): made by another model or dimension.
    dim 0 means the dimension is not known yet (an API model): only the model is compared."""
    return foreign_spaces_from(space_figures(conn), model, dim)


def delete_foreign(conn: Connection, model: str, dim: int, now: float) -> int:
    """Remove every vector not of (model, dim), leaving tombstones; return how many."""
    rows = conn.execute("SELECT kind, owner_id FROM vectors WHERE model != ? OR dim != ?",
                        (model, dim)).fetchall()
    for kind, owner_id in rows:
        conn.execute("INSERT INTO vector_tombstones (seq, kind, owner_id, create_time) VALUES (?, ?, ?, ?)",
                     (next_seq(conn), kind, owner_id, now))
    conn.execute("DELETE FROM vectors WHERE model != ? OR dim != ?", (model, dim))
    return len(rows)


def foreign_space_warning(conn: Connection, model: str, dim: int) -> str | None:
    """A plain message when stored vectors come from another model or dimension, else None."""
    foreign = foreign_spaces(conn, model, dim)
    if not foreign:
        return None
    spaces = "; ".join(f"{count} {kind} vectors from {m} ({d} dims)" for kind, m, d, count in foreign)
    return (f"stored vectors do not match the configured embedder {model} ({dim} dims): {spaces}. "
            "Vector recall uses only vectors of the configured model; the other channels serve "
            "the rest. Run `aokun rebuild-index` to re-embed everything with the configured model.")


