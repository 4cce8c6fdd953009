"""The panel's graph reads SQLite spells its own way (json_each, its plans)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from shared.store.model.graph import NODE_TYPES


def persona_node_counts(conn: sqlite3.Connection, persona_id: str) -> dict[str, int]:
    """{node type: count} in one persona's graph ('' for nodes without a persona), counted
    on the (persona_id, key) index alone: a key starts with its type and a colon."""
    return {t: conn.execute("SELECT COUNT(*) FROM graph_nodes WHERE persona_id = ? AND key >= ? AND key < ?",
                            (persona_id, f"{t}:", f"{t};")).fetchone()[0] for t in NODE_TYPES}


def edges_among(conn: sqlite3.Connection, node_ids: Sequence[int]) -> list[tuple[int, int, str, str | None, int]]:
    """(src, dst, type, relation, memories) for edges joining two of the given nodes, one row
    per (src, dst, type, relation) with the number of memories it comes from; relation is
    None but for "relation" edges."""
    ids = json.dumps(list(node_ids))
    return conn.execute(
        "SELECT src_node_id, dst_node_id, type, relation, COUNT(DISTINCT source_memory_id) FROM graph_edges"
        " WHERE src_node_id IN (SELECT value FROM json_each(?))"
        " AND dst_node_id IN (SELECT value FROM json_each(?)) GROUP BY 1, 2, 3, 4", (ids, ids)).fetchall()


def node_links(conn: sqlite3.Connection, node_id: int, limit: int) -> list[sqlite3.Row]:
    """The nodes one edge away: id, type, value, edge_type, memories (how many memories the
    link comes from), memory_ids (comma-separated), the most shared links first."""
    return conn.execute(
        "SELECT n.id, n.type, n.value, l.edge_type, COUNT(DISTINCT l.memory_id) AS memories,"
        " group_concat(DISTINCT l.memory_id) AS memory_ids FROM ("
        " SELECT dst_node_id AS other, type AS edge_type, source_memory_id AS memory_id"
        " FROM graph_edges WHERE src_node_id = ? UNION ALL"
        " SELECT src_node_id, type, source_memory_id FROM graph_edges WHERE dst_node_id = ?) l"
        " JOIN graph_nodes n ON n.id = l.other GROUP BY n.id, l.edge_type"
        " ORDER BY memories DESC, n.id DESC LIMIT ?", (node_id, node_id, limit)).fetchall()
