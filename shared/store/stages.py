"""The per-memory stage journal: the truth about what each memory still needs.

A memory's follow-up work (embed, atoms, graph) is a row per stage with status, attempts, a
lease and the content hash it is for. The queue only carries hints; these rows survive any
crash and the reconciler re-enqueues from them.
"""

from __future__ import annotations

import sqlite3

STAGES = ("embed", "atoms", "graph")

DDL = [
    """
    CREATE TABLE memory_stages (
        memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        stage TEXT NOT NULL CHECK (stage IN ('embed', 'atoms', 'graph')),
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'running', 'done', 'failed')),
        content_hash TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_until REAL,
        next_attempt_time REAL,
        last_error TEXT,
        update_time REAL NOT NULL,
        PRIMARY KEY (memory_id, stage)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX memory_stages_status ON memory_stages (status, lease_until)",
]


def delete_for_memory(conn: sqlite3.Connection, memory_id: int) -> dict[str, int]:
    """Remove a memory's stage rows; return {table: rows removed}."""
    cur = conn.execute("DELETE FROM memory_stages WHERE memory_id = ?", (memory_id,))
    return {"memory_stages": cur.rowcount}


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {"memory_stages": conn.execute("SELECT COUNT(*) FROM memory_stages").fetchone()[0]}
