"""The knowledge graph: nodes, edges and searchable entries that map back to memories."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Sequence

from shared.store import runtime, vectors

DDL = [
    """
    CREATE TABLE graph_nodes (
        id INTEGER PRIMARY KEY,
        persona_id TEXT NOT NULL DEFAULT '',
        key TEXT NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('topic', 'person', 'fact')),
        value TEXT NOT NULL,
        canonical TEXT NOT NULL,
        create_time REAL NOT NULL,
        UNIQUE (persona_id, key)
    )
    """,
    "CREATE INDEX graph_nodes_canonical ON graph_nodes (canonical)",
    """
    CREATE TABLE graph_edges (
        id INTEGER PRIMARY KEY,
        source_memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        src_node_id INTEGER NOT NULL REFERENCES graph_nodes(id) ON DELETE CASCADE,
        dst_node_id INTEGER NOT NULL REFERENCES graph_nodes(id) ON DELETE CASCADE,
        type TEXT NOT NULL CHECK (type IN ('describes', 'mentioned_in', 'co_occurs_with')),
        confidence REAL NOT NULL DEFAULT 0.0,
        weight REAL NOT NULL DEFAULT 1.0,
        create_time REAL NOT NULL
    )
    """,
    # Ordered so that "the strongest links of a node" is an index range scan with a LIMIT,
    # however many memories a hub node (a person in every memory) touches.
    "CREATE INDEX graph_edges_src ON graph_edges (src_node_id, confidence DESC, source_memory_id DESC)",
    "CREATE INDEX graph_edges_dst ON graph_edges (dst_node_id, confidence DESC, source_memory_id DESC)",
    "CREATE INDEX graph_edges_src_weight ON graph_edges (src_node_id, weight DESC, dst_node_id)",
    "CREATE INDEX graph_edges_dst_weight ON graph_edges (dst_node_id, weight DESC, src_node_id)",
    "CREATE INDEX graph_edges_memory ON graph_edges (source_memory_id)",
    """
    CREATE TABLE graph_entries (
        id INTEGER PRIMARY KEY,
        source_memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        node_id INTEGER REFERENCES graph_nodes(id) ON DELETE SET NULL,
        persona_id TEXT,
        text TEXT NOT NULL,
        confidence REAL NOT NULL DEFAULT 0.0,
        content_hash TEXT,
        create_time REAL NOT NULL
    )
    """,
    "CREATE INDEX graph_entries_memory ON graph_entries (source_memory_id)",
    "CREATE INDEX graph_entries_node ON graph_entries (node_id, confidence DESC, source_memory_id DESC)",
    "CREATE VIRTUAL TABLE graph_entries_fts USING fts5(tokens, tokenize = 'porter unicode61 remove_diacritics 2')",
]


@dataclass(frozen=True)
class NodeSpec:
    type: str          # topic | person | fact
    value: str         # as written
    canonical: str     # resolved form (case, width, aliases); nodes are keyed on it

    @property
    def key(self) -> str:
        return f"{self.type}:{self.value}:{self.canonical}"


@dataclass(frozen=True)
class EdgeSpec:
    src: NodeSpec
    dst: NodeSpec
    type: str          # describes | mentioned_in | co_occurs_with
    confidence: float
    weight: float = 1.0


@dataclass(frozen=True)
class EntrySpec:
    text: str          # searchable, e.g. "Fact: ... Summary: ..."
    tokens: str        # segmented terms of text, for FTS
    node: NodeSpec | None
    confidence: float


@dataclass(frozen=True)
class MemoryGraph:
    """Everything the graph holds for one memory."""

    nodes: Sequence[NodeSpec]
    edges: Sequence[EdgeSpec]
    entries: Sequence[EntrySpec]


def replace_for_memory(conn: sqlite3.Connection, memory_id: int, persona_id: str | None,
                       graph: MemoryGraph, content_hash: str, now: float) -> list[int]:
    """Replace a memory's graph output (old output deleted first, with its entry vectors);
    return the new entry ids."""
    delete_for_memory(conn, memory_id, now)
    vectors.delete_for_memory(conn, memory_id, now, kind="graph_entry")
    persona = persona_id or ""
    ids = {}
    for node in {n.key: n for n in [*graph.nodes, *(e.src for e in graph.edges),
                                    *(e.dst for e in graph.edges),
                                    *(e.node for e in graph.entries if e.node)]}.values():
        conn.execute("INSERT INTO graph_nodes (persona_id, key, type, value, canonical, create_time)"
                     " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (persona_id, key) DO NOTHING",
                     (persona, node.key, node.type, node.value, node.canonical, now))
        ids[node.key] = conn.execute("SELECT id FROM graph_nodes WHERE persona_id = ? AND key = ?",
                                     (persona, node.key)).fetchone()[0]
    conn.executemany(
        "INSERT INTO graph_edges (source_memory_id, src_node_id, dst_node_id, type, confidence,"
        " weight, create_time) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(memory_id, ids[e.src.key], ids[e.dst.key], e.type, e.confidence, e.weight, now)
         for e in graph.edges])
    entry_ids = []
    for entry in graph.entries:
        cur = conn.execute(
            "INSERT INTO graph_entries (source_memory_id, node_id, persona_id, text, confidence,"
            " content_hash, create_time) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (memory_id, ids[entry.node.key] if entry.node else None, persona_id, entry.text,
             entry.confidence, content_hash, now))
        conn.execute("INSERT INTO graph_entries_fts (rowid, tokens) VALUES (?, ?)",
                     (cur.lastrowid, entry.tokens))
        entry_ids.append(cur.lastrowid)
    runtime.bump_epoch(conn)
    return entry_ids


def search_entries(conn: sqlite3.Connection, match: str, persona_id: str | None,
                   limit: int) -> list[tuple[int, int, float, float]]:
    """(entry_id, memory_id, raw bm25 score (higher is better), confidence), best first."""
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
                " ORDER BY weight DESC LIMIT ?", (node, limit)).fetchall() + conn.execute(
                "SELECT src_node_id, weight FROM graph_edges WHERE dst_node_id = ?"
                " ORDER BY weight DESC LIMIT ?", (node, limit)).fetchall():
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
    counts = {}
    for node in node_ids:
        counts[node] = conn.execute(
            "SELECT COUNT(*) FROM (SELECT DISTINCT source_memory_id FROM ("
            " SELECT source_memory_id FROM graph_edges WHERE src_node_id = ?"
            " UNION ALL SELECT source_memory_id FROM graph_edges WHERE dst_node_id = ?) LIMIT ?)",
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


def entries_memories(conn: sqlite3.Connection, entry_ids: Sequence[int]) -> dict[int, tuple[int, float]]:
    """{entry_id: (memory_id, confidence)}."""
    if not entry_ids:
        return {}
    marks = ",".join("?" * len(entry_ids))
    return {r[0]: (r[1], r[2]) for r in conn.execute(
        f"SELECT id, source_memory_id, confidence FROM graph_entries WHERE id IN ({marks})",
        tuple(entry_ids))}


def delete_fact(conn: sqlite3.Connection, memory_id: int, canonical: str, now: float) -> dict[str, int]:
    """Remove one fact of a memory from the graph: its entries (and their vectors), its edges,
    and nodes nothing refers to any more."""
    node = conn.execute("SELECT n.id FROM graph_nodes n WHERE n.type = 'fact' AND n.canonical = ?"
                        " AND EXISTS (SELECT 1 FROM graph_entries e WHERE e.node_id = n.id"
                        " AND e.source_memory_id = ?)", (canonical, memory_id)).fetchone()
    if node is None:
        return {"graph_entries": 0, "graph_edges": 0}
    entries = [r[0] for r in conn.execute(
        "SELECT id FROM graph_entries WHERE node_id = ? AND source_memory_id = ?", (node[0], memory_id))]
    for entry_id in entries:
        vectors.delete_owner(conn, "graph_entry", entry_id, now)
        conn.execute("DELETE FROM graph_entries_fts WHERE rowid = ?", (entry_id,))
        conn.execute("DELETE FROM graph_entries WHERE id = ?", (entry_id,))
    edges = conn.execute("DELETE FROM graph_edges WHERE source_memory_id = ? AND (src_node_id = ? OR dst_node_id = ?)",
                         (memory_id, node[0], node[0])).rowcount
    _delete_orphan_nodes(conn)
    runtime.bump_epoch(conn)
    return {"graph_entries": len(entries), "graph_edges": edges}


def _delete_orphan_nodes(conn: sqlite3.Connection) -> int:
    return conn.execute(
        "DELETE FROM graph_nodes WHERE id NOT IN (SELECT src_node_id FROM graph_edges) "
        "AND id NOT IN (SELECT dst_node_id FROM graph_edges) "
        "AND id NOT IN (SELECT node_id FROM graph_entries WHERE node_id IS NOT NULL)").rowcount


def delete_for_memory(conn: sqlite3.Connection, memory_id: int, now: float) -> dict[str, int]:
    """Remove a memory's graph output, then any node nothing refers to any more."""
    fts = conn.execute(
        "DELETE FROM graph_entries_fts WHERE rowid IN "
        "(SELECT id FROM graph_entries WHERE source_memory_id = ?)", (memory_id,)).rowcount
    entries = conn.execute("DELETE FROM graph_entries WHERE source_memory_id = ?", (memory_id,)).rowcount
    edges = conn.execute("DELETE FROM graph_edges WHERE source_memory_id = ?", (memory_id,)).rowcount
    nodes = _delete_orphan_nodes(conn) if edges or entries else 0
    return {"graph_entries": entries, "graph_entries_fts": fts, "graph_edges": edges, "graph_nodes": nodes}


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {name: conn.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0]
            for name in ("graph_nodes", "graph_edges", "graph_entries", "graph_entries_fts")}
