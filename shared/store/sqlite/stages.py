"""The stage journal on SQLite: what passes id lists through json_each."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {"memory_stages": conn.execute("SELECT COUNT(*) FROM memory_stages").fetchone()[0]}


def done_among(conn: sqlite3.Connection, memory_ids: Sequence[int], stage: str) -> set[int]:
    """Those of the memories whose stage has finished for their current content."""
    if not memory_ids:
        return set()
    # CROSS JOIN keeps the ids as the outer loop: one primary-key probe each.
    return {r[0] for r in conn.execute(
        "SELECT s.memory_id FROM json_each(?) AS j CROSS JOIN memory_stages s"
        " ON s.memory_id = j.value AND s.stage = ? JOIN documents d ON d.id = s.memory_id"
        " WHERE s.status = 'done' AND s.content_hash = d.content_hash",
        (json.dumps(list(memory_ids)), stage))}
