"""Vectors on SQLite: the reads that stream a space or its changes, or pass id lists through
json_each."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence

import numpy as np

from shared.store.portable.vectors import batches


def iter_space(conn: sqlite3.Connection, kind: str, model: str, dim: int,
               batch: int = 5000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(ids, matrix) batches of every vector of one space."""
    return batches(conn.execute("SELECT owner_id, vector FROM vectors WHERE kind = ? AND model = ?"
                                 " AND dim = ?", (kind, model, dim)), dim, batch)


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {"vectors": conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]}


# Changes since a sequence number are read through the index on seq (INDEXED BY): without
# statistics SQLite prefers the primary key's kind prefix and reads every vector of the kind.
def iter_changes(conn: sqlite3.Connection, kind: str, model: str, dim: int, after_seq: int,
                 batch: int = 5000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(ids, matrix) batches of one vector space's rows written after `after_seq`."""
    return batches(conn.execute(
        "SELECT owner_id, vector FROM vectors INDEXED BY vectors_seq"
        " WHERE seq > ? AND kind = ? AND model = ? AND dim = ?", (after_seq, kind, model, dim)), dim, batch)


def owners_changed_since(conn: sqlite3.Connection, kind: str, after_seq: int) -> list[int]:
    """Owners of `kind` whose vector was written, replaced or deleted after `after_seq`."""
    rows = conn.execute(
        "SELECT owner_id FROM vectors INDEXED BY vectors_seq WHERE seq > ? AND kind = ?"
        " UNION SELECT owner_id FROM vector_tombstones WHERE seq > ? AND kind = ?",
        (after_seq, kind, after_seq, kind)).fetchall()
    return [r[0] for r in rows]


def changes_since(conn: sqlite3.Connection, kind: str, after_seq: int) -> int:
    """How many vector writes and deletions of `kind` came after `after_seq`."""
    return conn.execute(
        "SELECT (SELECT COUNT(*) FROM vectors INDEXED BY vectors_seq WHERE seq > ? AND kind = ?)"
        " + (SELECT COUNT(*) FROM vector_tombstones WHERE seq > ? AND kind = ?)",
        (after_seq, kind, after_seq, kind)).fetchone()[0]


def owners_with_vectors(conn: sqlite3.Connection, kind: str, model: str, owner_ids: Sequence[int]) -> set[int]:
    """Those of the owners that have a vector of this kind and model."""
    if not owner_ids:
        return set()
    return {r[0] for r in conn.execute(
        "SELECT v.owner_id FROM json_each(?) AS j CROSS JOIN vectors v"
        " ON v.kind = ? AND v.owner_id = j.value WHERE v.model = ?",
        (json.dumps(list(owner_ids)), kind, model))}
