"""The knowledge graph: nodes, edges and searchable entries that map back to memories.

Nodes are keyed on (persona, type, canonical form): "Alice" and "ALICE" are one person node,
which keeps every written form it was seen in. Each entry and fact node comes from one stored
atom (its id kept on the entry), so an atom's graph output is found and removed by atom id.

Here: the SQL both engines run, and the statements and values both engines' writes share
(ENTRY_INSERT, entry_values, insert_edges, entity_typed). Node upserts, the entries'
full-text rows and the reads that pass id lists are each engine's own (sqlite/graph.py,
postgres/graph.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.store.model.graph import ENTITY_TYPES, EdgeSpec, EntrySpec, NodeSpec
from shared.store.portable.connection import Connection

# Shared with the PostgreSQL version of replace_for_memory (shared/store/postgres/graph.py),
# which differs only in how a new entry's id comes back and where its search row goes.
ENTRY_INSERT = ("INSERT INTO graph_entries (source_memory_id, node_id, persona_id, text, confidence,"
                " content_hash, create_time, atom_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


def entry_values(memory_id: int, persona_id: str | None, ids: dict[str, int], entry: EntrySpec,
                 content_hash: str, now: float) -> tuple[Any, ...]:
    return (memory_id, ids[entry.node.key] if entry.node else None, persona_id, entry.text,
            entry.confidence, content_hash, now, entry.atom_id)


def insert_edges(conn: Connection, memory_id: int, ids: dict[str, int], edges: Sequence[EdgeSpec], now: float) -> None:
    conn.executemany(
        "INSERT INTO graph_edges (source_memory_id, src_node_id, dst_node_id, type, confidence,"
        " weight, create_time, relation) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(memory_id, ids[e.src.key], ids[e.dst.key], e.type, e.confidence, e.weight, now, e.relation)
         for e in edges])


def entity_typed(conn: Connection, persona: str, node: NodeSpec) -> NodeSpec:
    """The node as it will be stored: an entity takes the type its name already has in the
    persona's graph (see _upsert_node)."""
    if node.type in ENTITY_TYPES:
        row = conn.execute(
            "SELECT type FROM graph_nodes WHERE persona_id = ? AND canonical = ? AND type IN"
            f" ({','.join('?' * len(ENTITY_TYPES))}) ORDER BY id LIMIT 1",
            (persona, node.canonical, *ENTITY_TYPES)).fetchone()
        if row is not None and row[0] != node.type:
            return NodeSpec(row[0], node.value, node.canonical)
    return node


def entries_memories(conn: Connection, entry_ids: Sequence[int]) -> dict[int, tuple[int, float]]:
    """{entry_id: (memory_id, confidence)}."""
    if not entry_ids:
        return {}
    marks = ",".join("?" * len(entry_ids))
    return {r[0]: (r[1], r[2]) for r in conn.execute(
        f"SELECT id, source_memory_id, confidence FROM graph_entries WHERE id IN ({marks})",
        tuple(entry_ids))}

