"""Consistency checks across the stores: what a memory should have and lacks."""

from __future__ import annotations

import sqlite3

from shared.store import atoms, documents, graph, stages, vectors
from shared.store.portable.connection import Connection
from shared.store.sqlite.db import Database

# Derived output -> (stage that makes it, SQL listing done memories without it).
_CHECKS = {
    "stage rows": ("embed", "SELECT d.id FROM documents d WHERE NOT EXISTS"
                            " (SELECT 1 FROM memory_stages s WHERE s.memory_id = d.id)"),
    "vectors": ("embed", "SELECT s.memory_id FROM memory_stages s WHERE s.stage = 'embed' AND"
                         " s.status = 'done' AND NOT EXISTS (SELECT 1 FROM vectors v WHERE"
                         " v.kind = 'document' AND v.owner_id = s.memory_id AND v.model = :model)"),
    "atoms": ("atoms", "SELECT s.memory_id FROM memory_stages s WHERE s.stage = 'atoms' AND"
                       " s.status = 'done' AND NOT EXISTS (SELECT 1 FROM memory_atoms a WHERE"
                       " a.memory_id = s.memory_id)"),
    "graph entries": ("graph", "SELECT s.memory_id FROM memory_stages s WHERE s.stage = 'graph'"
                               " AND s.status = 'done' AND NOT EXISTS (SELECT 1 FROM graph_entries e"
                               " WHERE e.source_memory_id = s.memory_id)"),
    "atom search rows": ("atoms", "SELECT a.memory_id FROM memory_atoms a WHERE a.state IN"
                                  " ('active', 'expired', 'superseded') AND NOT EXISTS"
                                  " (SELECT 1 FROM atoms_fts f WHERE f.rowid = a.id)"),
}


def missing_outputs(conn: sqlite3.Connection, model: str) -> dict[str, list[int]]:
    """{what is missing: memory ids} for every check."""
    return {name: sorted({r[0] for r in conn.execute(sql, {"model": model})})
            for name, (_, sql) in _CHECKS.items()}


def redo_missing(conn: Connection, missing: dict[str, list[int]], now: float) -> int:
    """Set the stage that makes each missing output back to pending (stage rows recreated)."""
    redone = 0
    for name, ids in missing.items():
        stage = _CHECKS[name][0]
        for memory_id in ids:
            row = conn.execute("SELECT content_hash FROM documents WHERE id = ?", (memory_id,)).fetchone()
            if row is None:
                continue
            if name == "stage rows":
                stages.reset_for_memory(conn, memory_id, row[0], now)
            else:
                stages.restart(conn, memory_id, stage, row[0], now)
            redone += 1
    return redone


def all_table_counts(db: Database) -> dict[str, int]:
    """Rows per table, in one consistent read (memory_stats, doctor)."""
    with db.snapshot() as conn:
        counts = documents.table_counts(conn)
        for owner in (stages, atoms, graph, vectors):
            counts.update(owner.table_counts(conn))
    return counts
