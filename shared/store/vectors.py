"""Embedding vectors: the truth for every vector space; FAISS indexes are derived from it."""

from __future__ import annotations

import sqlite3

DDL = [
    """
    CREATE TABLE vectors (
        kind TEXT NOT NULL CHECK (kind IN ('document', 'graph_entry')),
        owner_id INTEGER NOT NULL,
        memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        dim INTEGER NOT NULL,
        vector BLOB NOT NULL,
        content_hash TEXT NOT NULL,
        create_time REAL NOT NULL,
        PRIMARY KEY (kind, owner_id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX vectors_memory ON vectors (memory_id)",
]


def delete_for_memory(conn: sqlite3.Connection, memory_id: int) -> dict[str, int]:
    """Remove every vector derived from a memory (its document and its graph entries)."""
    return {"vectors": conn.execute("DELETE FROM vectors WHERE memory_id = ?", (memory_id,)).rowcount}


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {"vectors": conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]}
