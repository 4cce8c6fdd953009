"""Conversation neighbours on SQLite: the texts of neighbours read through json_each."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from shared.store.portable.neighbours import IN_CONVERSATION


def texts_of(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, list[str]]:
    """{memory id: its neighbours' texts (those still in its conversation), nearest first}
    for many memories at once."""
    out: dict[int, list[str]] = {i: [] for i in ids}
    if not ids:
        return out
    for memory_id, text in conn.execute(
            f"SELECT c.memory_id, d.text FROM memory_context c {IN_CONVERSATION}"
            " WHERE c.memory_id IN (SELECT value FROM json_each(?)) ORDER BY c.memory_id, c.position",
            (json.dumps(list(ids)),)):
        out[memory_id].append(text)
    return out
