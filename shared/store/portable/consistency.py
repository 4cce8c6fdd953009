"""Consistency checks across the stores: what a memory should have and lacks, in SQL both
engines run; each engine checks its own full-text rows (sqlite/consistency.py, postgres/)."""

from __future__ import annotations

from shared.store.portable import stages
from shared.store.portable.connection import Connection

# Derived output -> (stage that makes it, SQL listing done memories without it).
CHECKS = {
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
}
# The check of an atom's full-text row, which each engine spells its own way; the atoms stage
# makes it.
ATOM_SEARCH_ROWS = "atom search rows"
MADE_BY = {**{name: stage for name, (stage, _) in CHECKS.items()}, ATOM_SEARCH_ROWS: "atoms"}


def redo_missing(conn: Connection, missing: dict[str, list[int]], now: float) -> int:
    """Set the stage that makes each missing output back to pending (stage rows recreated)."""
    redone = 0
    for name, ids in missing.items():
        stage = MADE_BY[name]
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

