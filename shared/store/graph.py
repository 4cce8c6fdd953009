"""The knowledge graph: nodes, edges and searchable entries that map back to memories."""

from __future__ import annotations

import sqlite3

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
    "CREATE INDEX graph_edges_src ON graph_edges (src_node_id)",
    "CREATE INDEX graph_edges_dst ON graph_edges (dst_node_id)",
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
    "CREATE VIRTUAL TABLE graph_entries_fts USING fts5(tokens, tokenize = 'porter unicode61 remove_diacritics 2')",
]


def delete_for_memory(conn: sqlite3.Connection, memory_id: int, now: float) -> dict[str, int]:
    """Remove a memory's graph output, then any node nothing refers to any more."""
    fts = conn.execute(
        "DELETE FROM graph_entries_fts WHERE rowid IN "
        "(SELECT id FROM graph_entries WHERE source_memory_id = ?)", (memory_id,)).rowcount
    entries = conn.execute("DELETE FROM graph_entries WHERE source_memory_id = ?", (memory_id,)).rowcount
    edges = conn.execute("DELETE FROM graph_edges WHERE source_memory_id = ?", (memory_id,)).rowcount
    nodes = 0
    if edges or entries:
        nodes = conn.execute(
            "DELETE FROM graph_nodes WHERE id NOT IN (SELECT src_node_id FROM graph_edges) "
            "AND id NOT IN (SELECT dst_node_id FROM graph_edges) "
            "AND id NOT IN (SELECT node_id FROM graph_entries WHERE node_id IS NOT NULL)").rowcount
    return {"graph_entries": entries, "graph_entries_fts": fts, "graph_edges": edges, "graph_nodes": nodes}


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {name: conn.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0]
            for name in ("graph_nodes", "graph_edges", "graph_entries", "graph_entries_fts")}
