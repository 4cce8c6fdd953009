"""Reading the knowledge graph as people browse it (the panel): a persona's most connected
nodes and the edges among them, one node's links, facts and source memories, one memory's
graph output. The graph's writes and recall's reads are in graph.py."""

from __future__ import annotations

from typing import Any

from shared.store.portable.connection import Connection


def entries_of_memory(conn: Connection, memory_id: int, limit: int = 200) -> list[Any]:
    """A memory's graph entries with the node each describes (the panel's memory page): id,
    text, confidence, atom_id, node_id, node_type, node_value."""
    return conn.execute(
        "SELECT e.id, e.text, e.confidence, e.atom_id, e.node_id, n.type AS node_type,"
        " n.value AS node_value FROM graph_entries e LEFT JOIN graph_nodes n ON n.id = e.node_id"
        " WHERE e.source_memory_id = ? ORDER BY e.id LIMIT ?", (memory_id, limit)).fetchall()


def edges_of_memory(conn: Connection, memory_id: int, limit: int = 200) -> list[Any]:
    """A memory's graph edges with the nodes they join (the panel's memory page): type,
    confidence, weight, src_id, src_type, src_value, dst_id, dst_type, dst_value."""
    return conn.execute(
        "SELECT e.type, e.confidence, e.weight, s.id AS src_id, s.type AS src_type,"
        " s.value AS src_value, d.id AS dst_id, d.type AS dst_type, d.value AS dst_value"
        " FROM graph_edges e JOIN graph_nodes s ON s.id = e.src_node_id"
        " JOIN graph_nodes d ON d.id = e.dst_node_id WHERE e.source_memory_id = ?"
        " ORDER BY e.id LIMIT ?", (memory_id, limit)).fetchall()


def graph_personas(conn: Connection, limit: int) -> list[str]:
    """Persona ids that have graph nodes ('' for none), sorted; one index seek per persona
    (a skip scan over the (persona_id, key) index) rather than a pass over every node."""
    return [r[0] for r in conn.execute(
        "WITH RECURSIVE p(persona) AS (SELECT MIN(persona_id) FROM graph_nodes UNION ALL"
        " SELECT (SELECT MIN(persona_id) FROM graph_nodes WHERE persona_id > p.persona) FROM p"
        " WHERE p.persona IS NOT NULL) SELECT persona FROM p WHERE persona IS NOT NULL LIMIT ?",
        (limit,))]


def most_connected(conn: Connection, persona_id: str, limit: int) -> list[tuple[int, str, str, str, int]]:
    """(id, type, value, canonical, degree) of a persona's `limit` most connected nodes, where
    degree counts edge rows (one per memory), most connected first."""
    return conn.execute(
        "SELECT n.id, n.type, n.value, n.canonical, (SELECT COUNT(*) FROM graph_edges WHERE src_node_id = n.id)"
        " + (SELECT COUNT(*) FROM graph_edges WHERE dst_node_id = n.id) AS degree"
        " FROM graph_nodes n WHERE n.persona_id = ? ORDER BY degree DESC, n.id LIMIT ?",
        (persona_id, limit)).fetchall()


def node_row(conn: Connection, node_id: int) -> Any | None:
    """One node: id, persona_id, type, value, canonical, forms (a JSON list)."""
    return conn.execute("SELECT id, persona_id, type, value, canonical, forms FROM graph_nodes"
                        " WHERE id = ?", (node_id,)).fetchone()


def node_relations(conn: Connection, node_id: int, limit: int) -> list[Any]:
    """A node's relation edges both ways: outgoing (1 when the edge leaves this node: the other
    is this node's `relation`; 0 when it arrives: this node is the other's), relation, id,
    type, value of the other node, memories (how many memories say it); most said first."""
    return conn.execute(
        "SELECT l.outgoing, l.relation, n.id, n.type, n.value, COUNT(DISTINCT l.memory_id) AS memories"
        " FROM (SELECT 1 AS outgoing, relation, dst_node_id AS other, source_memory_id AS memory_id"
        " FROM graph_edges WHERE src_node_id = ? AND relation IS NOT NULL UNION ALL"
        " SELECT 0, relation, src_node_id, source_memory_id FROM graph_edges"
        " WHERE dst_node_id = ? AND relation IS NOT NULL) l JOIN graph_nodes n ON n.id = l.other"
        " GROUP BY l.outgoing, l.relation, n.id ORDER BY memories DESC, n.id LIMIT ?",
        (node_id, node_id, limit)).fetchall()


def node_entries(conn: Connection, node_id: int, limit: int) -> list[Any]:
    """The searchable entries made for a node: id, source_memory_id, text, atom_id,
    confidence, most confident first."""
    return conn.execute(
        "SELECT id, source_memory_id, text, atom_id, confidence FROM graph_entries WHERE node_id = ?"
        " ORDER BY confidence DESC, source_memory_id DESC LIMIT ?", (node_id, limit)).fetchall()


def node_memories(conn: Connection, node_id: int, limit: int) -> tuple[list[int], int]:
    """(ids of up to `limit` distinct memories whose graph output touches a node, most
    confident then newest first; how many such memories there are in all)."""
    rows = conn.execute(
        "SELECT memory_id, MAX(confidence) AS best, COUNT(*) OVER () FROM ("
        " SELECT source_memory_id AS memory_id, confidence FROM graph_edges WHERE src_node_id = ?"
        " UNION ALL SELECT source_memory_id, confidence FROM graph_edges WHERE dst_node_id = ?"
        " UNION ALL SELECT source_memory_id, confidence FROM graph_entries WHERE node_id = ?) AS touching"
        " GROUP BY memory_id ORDER BY best DESC, memory_id DESC LIMIT ?",
        (node_id, node_id, node_id, limit)).fetchall()
    return [r[0] for r in rows], (rows[0][2] if rows else 0)
