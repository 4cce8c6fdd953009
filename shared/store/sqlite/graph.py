"""The graph on SQLite: node upserts, the FTS5 index of entries (graph_entries_fts), and the
reads that pass id lists through json_each. The rest is portable (portable/graph.py)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from shared.store.model.graph import ENTITY_TYPES, MemoryGraph, NodeSpec, nodes_of
from shared.store.portable import meta
from shared.store.portable.connection import Connection
from shared.store.portable.graph import ENTRY_INSERT, entity_typed, entry_values, insert_edges
from shared.store.sqlite.match import any_of


def replace_for_memory(conn: sqlite3.Connection, memory_id: int, persona_id: str | None,
                       graph: MemoryGraph, content_hash: str, now: float) -> list[int]:
    """Replace a memory's graph output (old output deleted first; the caller drops the old
    entries' vectors); return the new entry ids."""
    delete_for_memory(conn, memory_id)
    persona = persona_id or ""
    ids: dict[str, int] = {}
    for node in nodes_of(graph):
        ids[node.key] = _upsert_node(conn, persona, node, now)
    insert_edges(conn, memory_id, ids, graph.edges, now)
    entry_ids: list[int] = []
    for entry in graph.entries:
        cur = conn.execute(ENTRY_INSERT, entry_values(memory_id, persona_id, ids, entry, content_hash, now))
        assert cur.lastrowid is not None  # an INSERT's cursor has its row's id
        conn.execute("INSERT INTO graph_entries_fts (rowid, tokens) VALUES (?, ?)",
                     (cur.lastrowid, entry.tokens))
        entry_ids.append(cur.lastrowid)
    meta.bump_epoch(conn)
    return entry_ids


def _upsert_node(conn: sqlite3.Connection, persona: str, node: NodeSpec, now: float) -> int:
    """The node's id; a form of the name not seen before is added to its forms. An entity is
    one node per name in a persona's graph: the type it was first given stays, so one name
    typed two ways in two memories (Jackson the city, Jackson the friend) does not split."""
    node = entity_typed(conn, persona, node)
    conn.execute("INSERT INTO graph_nodes (persona_id, key, type, value, canonical, create_time, forms)"
                 " VALUES (?, ?, ?, ?, ?, ?, json_array(?)) ON CONFLICT (persona_id, key) DO UPDATE SET"
                 " forms = CASE WHEN EXISTS (SELECT 1 FROM json_each(graph_nodes.forms)"
                 " WHERE value = excluded.value) THEN graph_nodes.forms"
                 " ELSE json_insert(graph_nodes.forms, '$[#]', excluded.value) END",
                 (persona, node.key, node.type, node.value, node.canonical, now, node.value))
    return conn.execute("SELECT id FROM graph_nodes WHERE persona_id = ? AND key = ?",
                        (persona, node.key)).fetchone()[0]


def search_entries(conn: sqlite3.Connection, terms: Sequence[str], persona_id: str | None,
                   limit: int) -> list[tuple[int, int, float, float]]:
    """(entry_id, memory_id, raw bm25 score (higher is better), confidence), best first, for
    entries holding any of the terms."""
    match = any_of(terms)
    if match is None:
        return []
    scope, params = ("AND e.persona_id = ?", (persona_id,)) if persona_id is not None else ("", ())
    return conn.execute(
        "SELECT e.id, e.source_memory_id, -bm25(graph_entries_fts) AS raw, e.confidence"
        " FROM graph_entries_fts JOIN graph_entries e ON e.id = graph_entries_fts.rowid"
        f" WHERE graph_entries_fts MATCH ? {scope} ORDER BY raw DESC LIMIT ?",
        (match, *params, limit)).fetchall()


def nodes_named(conn: sqlite3.Connection, canonicals: Sequence[str], persona_id: str | None,
                limit: int) -> list[int]:
    """Ids of nodes whose canonical form is one of the given terms (in one persona's graph
    when persona_id is given)."""
    if not canonicals:
        return []
    marks = ",".join("?" * len(canonicals))
    scope, params = ("AND persona_id = ?", (persona_id,)) if persona_id is not None else ("", ())
    return [r[0] for r in conn.execute(
        f"SELECT id FROM graph_nodes WHERE canonical IN ({marks}) {scope} LIMIT ?",
        (*canonicals, *params, limit))]


def neighbours(conn: sqlite3.Connection, node_ids: Sequence[int], limit: int) -> list[int]:
    """Up to `limit` nodes one edge away from any of node_ids (not themselves), strongest
    edges first."""
    if not node_ids or limit <= 0:
        return []
    strength: dict[int, float] = {}
    for node in node_ids:
        for other, weight in conn.execute(
                "SELECT dst_node_id, weight FROM graph_edges WHERE src_node_id = ?"
                " ORDER BY weight DESC, dst_node_id LIMIT ?", (node, limit)).fetchall() + conn.execute(
                "SELECT src_node_id, weight FROM graph_edges WHERE dst_node_id = ?"
                " ORDER BY weight DESC, src_node_id LIMIT ?", (node, limit)).fetchall():
            strength[other] = max(weight, strength.get(other, 0.0))
    hits = set(node_ids)
    return [n for n, _ in sorted(strength.items(), key=lambda kv: -kv[1]) if n not in hits][:limit]


def memories_of_nodes(conn: sqlite3.Connection, node_ids: Sequence[int],
                      limit: int) -> list[tuple[int, int, float]]:
    """(node_id, memory_id, confidence) for memories whose graph output touches a node: per
    node its `limit` most confident (then newest) links."""
    found: dict[tuple[int, int], float] = {}
    for node in node_ids:
        for sql in _NODE_MEMORIES:
            for memory_id, confidence in conn.execute(sql, (node, limit)):
                key = (node, memory_id)
                found[key] = max(confidence, found.get(key, 0.0))
    return [(node, memory, confidence) for (node, memory), confidence in found.items()]


_NODE_MEMORIES = [
    "SELECT source_memory_id, confidence FROM graph_edges WHERE src_node_id = ?"
    " ORDER BY confidence DESC, source_memory_id DESC LIMIT ?",
    "SELECT source_memory_id, confidence FROM graph_edges WHERE dst_node_id = ?"
    " ORDER BY confidence DESC, source_memory_id DESC LIMIT ?",
    "SELECT source_memory_id, confidence FROM graph_entries WHERE node_id = ?"
    " ORDER BY confidence DESC, source_memory_id DESC LIMIT ?",
]


def node_memory_counts(conn: sqlite3.Connection, node_ids: Sequence[int], cap: int) -> dict[int, int]:
    """How many distinct memories each node's edges come from (counted up to `cap`)."""
    counts: dict[int, int] = {}
    for node in node_ids:
        counts[node] = conn.execute(
            "SELECT COUNT(*) FROM (SELECT DISTINCT source_memory_id FROM ("
            " SELECT source_memory_id FROM graph_edges WHERE src_node_id = ?"
            " UNION ALL SELECT source_memory_id FROM graph_edges WHERE dst_node_id = ?) AS touching"
            " LIMIT ?) AS capped",
            (node, node, cap)).fetchone()[0]
    return counts


def entry_nodes(conn: sqlite3.Connection, entry_ids: Sequence[int]) -> list[int]:
    """The nodes the given entries describe."""
    if not entry_ids:
        return []
    marks = ",".join("?" * len(entry_ids))
    return [r[0] for r in conn.execute(
        f"SELECT DISTINCT node_id FROM graph_entries WHERE id IN ({marks}) AND node_id IS NOT NULL",
        tuple(entry_ids))]


def entry_ids_of_memories(conn: sqlite3.Connection, memory_ids: Sequence[int]) -> list[int]:
    """Ids of the graph entries of the given memories."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM graph_entries WHERE source_memory_id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(memory_ids)),))]


def entries_of_atoms(conn: sqlite3.Connection, atom_ids: Sequence[int]) -> list[int]:
    """Ids of the graph entries made from the given atoms."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM graph_entries WHERE atom_id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(atom_ids)),))]


def delete_entries(conn: sqlite3.Connection, entry_ids: Sequence[int]) -> dict[str, int]:
    """Remove entries (an atom's graph output: the caller drops their vectors), the edges of
    their memory that touch their fact node, and nodes nothing refers to any more."""
    rows = conn.execute(
        "SELECT id, source_memory_id, node_id FROM graph_entries WHERE id IN"
        " (SELECT value FROM json_each(?))", (json.dumps(list(entry_ids)),)).fetchall()
    edges = 0
    for entry_id, memory_id, node_id in rows:
        conn.execute("DELETE FROM graph_entries_fts WHERE rowid = ?", (entry_id,))
        conn.execute("DELETE FROM graph_entries WHERE id = ?", (entry_id,))
        if node_id is not None:
            edges += conn.execute(
                "DELETE FROM graph_edges WHERE source_memory_id = ? AND (src_node_id = ? OR dst_node_id = ?)",
                (memory_id, node_id, node_id)).rowcount
    nodes = _delete_orphan_nodes(conn) if rows else 0
    if rows:
        meta.bump_epoch(conn)
    return {"graph_entries": len(rows), "graph_edges": edges, "graph_nodes": nodes}


def _delete_orphan_nodes(conn: Connection) -> int:
    return conn.execute(
        "DELETE FROM graph_nodes WHERE id NOT IN (SELECT src_node_id FROM graph_edges) "
        "AND id NOT IN (SELECT dst_node_id FROM graph_edges) "
        "AND id NOT IN (SELECT node_id FROM graph_entries WHERE node_id IS NOT NULL)").rowcount


def delete_for_memory(conn: Connection, memory_id: int) -> dict[str, int]:
    """Remove a memory's graph output, then any node nothing refers to any more."""
    fts = conn.execute(
        "DELETE FROM graph_entries_fts WHERE rowid IN "
        "(SELECT id FROM graph_entries WHERE source_memory_id = ?)", (memory_id,)).rowcount
    entries = conn.execute("DELETE FROM graph_entries WHERE source_memory_id = ?", (memory_id,)).rowcount
    edges = conn.execute("DELETE FROM graph_edges WHERE source_memory_id = ?", (memory_id,)).rowcount
    nodes = _delete_orphan_nodes(conn) if edges or entries else 0
    if edges or entries:
        meta.bump_epoch(conn)
    return {"graph_entries": entries, "graph_entries_fts": fts, "graph_edges": edges, "graph_nodes": nodes}


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {name: conn.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0]
            for name in ("graph_nodes", "graph_edges", "graph_entries", "graph_entries_fts")}


def memory_confidence(conn: sqlite3.Connection, memory_ids: Sequence[int]) -> dict[int, float]:
    """Per memory with graph output: the best confidence of its entries."""
    return dict(conn.execute(
        "SELECT source_memory_id, MAX(confidence) FROM graph_entries WHERE source_memory_id IN"
        " (SELECT value FROM json_each(?)) GROUP BY source_memory_id", (json.dumps(list(memory_ids)),)))


def memories_with_output(conn: sqlite3.Connection, memory_ids: Sequence[int]) -> set[int]:
    """Those of the memories that have graph entries."""
    if not memory_ids:
        return set()
    return {r[0] for r in conn.execute(
        "SELECT DISTINCT e.source_memory_id FROM json_each(?) AS j CROSS JOIN graph_entries e"
        " ON e.source_memory_id = j.value", (json.dumps(list(memory_ids)),))}


def entity_nodes_named(conn: sqlite3.Connection, canonicals: Sequence[str],
                       persona_id: str | None) -> dict[str, list[int]]:
    """{canonical: ids of entity nodes with that name} (in one persona's graph when given)."""
    if not canonicals:
        return {}
    scope, params = ("AND persona_id = ?", (persona_id,)) if persona_id is not None else ("", ())
    found: dict[str, list[int]] = {}
    for node_id, name in conn.execute(
            f"SELECT id, canonical FROM graph_nodes WHERE canonical IN ({','.join('?' * len(canonicals))})"
            f" AND type IN ({','.join('?' * len(ENTITY_TYPES))}) {scope}",
            (*canonicals, *ENTITY_TYPES, *params)):
        found.setdefault(name, []).append(node_id)
    return found


def related(conn: sqlite3.Connection, node_ids: Sequence[int], forward: Sequence[str],
            backward: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """(node, best confidence) at the other end of relation edges: from the nodes along a
    relation in `forward`, or into them along one in `backward` (the caller's inverses)."""
    if not node_ids:
        return []
    nodes = json.dumps(list(node_ids))
    best: dict[int, float] = {}
    for other, confidence in conn.execute(
            "SELECT dst_node_id, confidence FROM graph_edges WHERE src_node_id IN (SELECT value FROM"
            " json_each(?)) AND relation IN (SELECT value FROM json_each(?))"
            " UNION ALL SELECT src_node_id, confidence FROM graph_edges WHERE dst_node_id IN"
            " (SELECT value FROM json_each(?)) AND relation IN (SELECT value FROM json_each(?))",
            (nodes, json.dumps(list(forward)), nodes, json.dumps(list(backward)))):
        best[other] = max(confidence, best.get(other, 0.0))
    return sorted(best.items(), key=lambda kv: -kv[1])[:limit]
