"""The graph on PostgreSQL: the portable aggregate (shared/store/portable/aggregates.py) with
PostgreSQL versions of the methods whose SQL is each engine's own — entries' search rows live
in this package's full-text tables (fulltext.py), id lists are arrays, new ids come back by
RETURNING, a nullable persona is compared with IS NULL or =, and graph_nodes.forms (TEXT
holding a JSON list) is merged with jsonb functions.

Reads that SQLite answers in an index's order without saying so (an id list looked up through
an index, GROUP BY output) say their order here: PostgreSQL's heap order is not the id order
once rows are updated, so the order SQLite's plan gives is written out as ORDER BY.

The functions take a PgConnection (connection.py): `execute` for the qmark SQL shared with
SQLite, `sql` for statements written for PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
import psycopg.sql

from shared.store.model.graph import MemoryGraph, NodeSpec, nodes_of
from shared.store.model.record import Record
from shared.store.portable import graph, meta
from shared.store.portable.aggregates import PortableGraph
from shared.store.postgres import fulltext
from shared.store.postgres.connection import PgConnection


def replace_for_memory(tx: PgConnection, memory_id: int, persona_id: str | None, memory_graph: MemoryGraph,
                       content_hash: str, now: float) -> list[int]:
    """As graph.replace_for_memory: entries' ids by RETURNING, their search rows in fulltext's
    table."""
    graph_delete_for_memory(tx, memory_id)
    persona = persona_id or ""
    ids = {node.key: _upsert_node(tx, persona, node, now) for node in nodes_of(memory_graph)}
    graph.insert_edges(tx, memory_id, ids, memory_graph.edges, now)
    entry_ids: list[int] = []
    for entry in memory_graph.entries:
        entry_id = tx.execute(graph.ENTRY_INSERT + " RETURNING id",
                              graph.entry_values(memory_id, persona_id, ids, entry, content_hash, now)).fetchone()[0]
        fulltext.add_row(tx.raw, "graph_entries", entry_id, (entry.tokens,), persona_id)
        entry_ids.append(entry_id)
    meta.bump_epoch(tx)
    return entry_ids


def _upsert_node(tx: PgConnection, persona: str, node: NodeSpec, now: float) -> int:
    """As graph._upsert_node, looked up before written: an INSERT ... ON CONFLICT would take a
    number from the id sequence on every conflict (ids would drift from SQLite's, where a copy
    between engines keeps them) and rewrite the row even when its forms are unchanged. The
    write lock keeps the look-up and the write together. forms is TEXT holding a JSON list,
    read and extended as jsonb; a form is added when no element equals it."""
    node = graph.entity_typed(tx, persona, node)
    row = tx.sql("SELECT id, forms::jsonb @> jsonb_build_array(%s::text) FROM graph_nodes"
                 " WHERE persona_id = %s AND key = %s", (node.value, persona, node.key)).fetchone()
    if row is None:
        return tx.sql("INSERT INTO graph_nodes (persona_id, key, type, value, canonical, create_time, forms)"
                      " VALUES (%s, %s, %s, %s, %s, %s, jsonb_build_array(%s::text)::text) RETURNING id",
                      (persona, node.key, node.type, node.value, node.canonical, now, node.value)).fetchone()[0]
    if not row[1]:
        tx.sql("UPDATE graph_nodes SET forms = (forms::jsonb || jsonb_build_array(%s::text))::text"
               " WHERE id = %s", (node.value, row[0]))
    return row[0]


def graph_delete_for_memory(tx: PgConnection, memory_id: int) -> dict[str, int]:
    """As graph.delete_for_memory, the entries' search rows removed from fulltext's table."""
    ids = [r[0] for r in tx.sql("SELECT id FROM graph_entries WHERE source_memory_id = %s", (memory_id,))]
    fts = fulltext.remove_rows(tx.raw, "graph_entries", ids) if ids else 0
    entries = tx.sql("DELETE FROM graph_entries WHERE source_memory_id = %s", (memory_id,)).rowcount
    edges = tx.sql("DELETE FROM graph_edges WHERE source_memory_id = %s", (memory_id,)).rowcount
    nodes = _delete_orphan_nodes(tx) if edges or entries else 0
    if edges or entries:
        meta.bump_epoch(tx)
    return {"graph_entries": entries, "graph_entries_fts": fts, "graph_edges": edges, "graph_nodes": nodes}


def delete_entries(tx: PgConnection, entry_ids: Sequence[int]) -> dict[str, int]:
    """As graph.delete_entries (entries in id order, as SQLite looks them up)."""
    rows = tx.sql("SELECT id, source_memory_id, node_id FROM graph_entries WHERE id = ANY(%s) ORDER BY id",
                  (list(entry_ids),)).fetchall() if entry_ids else []
    if rows:
        fulltext.remove_rows(tx.raw, "graph_entries", [r[0] for r in rows])
    edges = 0
    for entry_id, memory_id, node_id in rows:
        tx.sql("DELETE FROM graph_entries WHERE id = %s", (entry_id,))
        if node_id is not None:
            edges += tx.sql(
                "DELETE FROM graph_edges WHERE source_memory_id = %s AND (src_node_id = %s OR dst_node_id = %s)",
                (memory_id, node_id, node_id)).rowcount
    nodes = _delete_orphan_nodes(tx) if rows else 0
    if rows:
        meta.bump_epoch(tx)
    return {"graph_entries": len(rows), "graph_edges": edges, "graph_nodes": nodes}


def _delete_orphan_nodes(tx: PgConnection) -> int:
    """As graph._delete_orphan_nodes, as anti-joins: PostgreSQL runs SQLite's NOT IN (SELECT
    ...) as a hashed subplan only while every edge's node id fits in work_mem, and past that
    rescans the edges for each node; NOT EXISTS probes the node-id indexes instead."""
    return tx.sql(
        "DELETE FROM graph_nodes n WHERE NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.src_node_id = n.id)"
        " AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.dst_node_id = n.id)"
        " AND NOT EXISTS (SELECT 1 FROM graph_entries g WHERE g.node_id = n.id)").rowcount


def search_entries(conn: PgConnection, terms: Sequence[str], persona_id: str | None,
                   limit: int) -> list[Record]:
    """As graph.search_entries: (entry_id, memory_id, raw, confidence), raw best first (ties
    by id)."""
    if not terms:
        return []
    source, params = fulltext.ranked_join("graph_entries", "graph_entries", "e", terms,
                                  None if persona_id is None else [persona_id], None)
    scope, scope_params = ("AND e.persona_id = %s", [persona_id]) if persona_id is not None else ("", [])
    return conn.sql(psycopg.sql.SQL(
        "SELECT e.id, e.source_memory_id, s.raw, e.confidence {source} WHERE true {scope}"
        f" ORDER BY {fulltext.BEST_FIRST} LIMIT %s").format(source=source, scope=psycopg.sql.SQL(scope)),
        [*params, *scope_params, limit]).fetchall()


def nodes_named(conn: PgConnection, canonicals: Sequence[str], persona_id: str | None, limit: int) -> list[int]:
    if not canonicals:
        return []
    scope, params = ("AND persona_id = %s", [persona_id]) if persona_id is not None else ("", [])
    return [r[0] for r in conn.sql(
        f"SELECT id FROM graph_nodes WHERE canonical = ANY(%s) {scope} ORDER BY id LIMIT %s",
        [list(canonicals), *params, limit])]


def entity_nodes_named(conn: PgConnection, canonicals: Sequence[str],
                       persona_id: str | None) -> dict[str, list[int]]:
    if not canonicals:
        return {}
    scope, params = ("AND persona_id = %s", [persona_id]) if persona_id is not None else ("", [])
    found: dict[str, list[int]] = {}
    for node_id, name in conn.sql(
            f"SELECT id, canonical FROM graph_nodes WHERE canonical = ANY(%s) AND type = ANY(%s) {scope}"
            " ORDER BY id", [list(canonicals), list(graph.ENTITY_TYPES), *params]):
        found.setdefault(name, []).append(node_id)
    return found


def related(conn: PgConnection, node_ids: Sequence[int], forward: Sequence[str],
            backward: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """As graph.related; the rows come in the order SQLite's relation indexes give them, so
    equal confidences tie the same way."""
    if not node_ids:
        return []
    best: dict[int, float] = {}
    for other, confidence in conn.sql(
            "SELECT other, confidence FROM (SELECT dst_node_id AS other, confidence, 0 AS part,"
            " src_node_id AS node, relation, id FROM graph_edges WHERE src_node_id = ANY(%s)"
            " AND relation = ANY(%s) UNION ALL SELECT src_node_id, confidence, 1, dst_node_id, relation, id"
            " FROM graph_edges WHERE dst_node_id = ANY(%s) AND relation = ANY(%s)) AS edges"
            ' ORDER BY part, node, relation COLLATE "C", id',
            (list(node_ids), list(forward), list(node_ids), list(backward))):
        best[other] = max(confidence, best.get(other, 0.0))
    return sorted(best.items(), key=lambda kv: -kv[1])[:limit]


def entry_nodes(conn: PgConnection, entry_ids: Sequence[int]) -> list[int]:
    """As graph.entry_nodes: each node once, in the order of its first entry."""
    if not entry_ids:
        return []
    return [r[0] for r in conn.sql(
        "SELECT node_id FROM graph_entries WHERE id = ANY(%s) AND node_id IS NOT NULL"
        " GROUP BY node_id ORDER BY MIN(id)", (list(entry_ids),))]


def entry_ids_of_memories(conn: PgConnection, memory_ids: Sequence[int]) -> list[int]:
    if not memory_ids:
        return []
    return [r[0] for r in conn.sql("SELECT id FROM graph_entries WHERE source_memory_id = ANY(%s)"
                                   " ORDER BY source_memory_id, id", (list(memory_ids),))]


def entries_of_atoms(conn: PgConnection, atom_ids: Sequence[int]) -> list[int]:
    if not atom_ids:
        return []
    return [r[0] for r in conn.sql("SELECT id FROM graph_entries WHERE atom_id = ANY(%s)"
                                   " ORDER BY atom_id, id", (list(atom_ids),))]


def memory_confidence(conn: PgConnection, memory_ids: Sequence[int]) -> dict[int, float]:
    if not memory_ids:
        return {}
    return dict(conn.sql(
        "SELECT source_memory_id, MAX(confidence) FROM graph_entries WHERE source_memory_id = ANY(%s)"
        " GROUP BY source_memory_id ORDER BY source_memory_id", (list(memory_ids),)).fetchall())


def memories_with_output(conn: PgConnection, memory_ids: Sequence[int]) -> set[int]:
    if not memory_ids:
        return set()
    return {r[0] for r in conn.sql(
        "SELECT DISTINCT source_memory_id FROM graph_entries WHERE source_memory_id = ANY(%s)",
        (list(memory_ids),))}


def graph_table_counts(conn: PgConnection) -> dict[str, int]:
    """As graph.table_counts, the search rows counted in fulltext's table."""
    counts = {name: conn.sql(f"SELECT COUNT(*) FROM {name}").fetchone()[0]
              for name in ("graph_nodes", "graph_edges", "graph_entries")}
    counts["graph_entries_fts"] = fulltext.rows_count(conn.raw, "graph_entries")
    return counts


# -- recall's graph reads, one statement for all nodes -------------------------------------------
# SQLite's versions ask once per node (cheap in-process); here each statement is a round trip,
# so the nodes go as an array and the rows come back in the order the per-node loop makes
# (node, then arm, then rank), which the callers' merging depends on for ties.

_NODE_ARMS = (("graph_edges", "src_node_id"), ("graph_edges", "dst_node_id"), ("graph_entries", "node_id"))


def memories_of_nodes(conn: PgConnection, node_ids: Sequence[int], limit: int) -> list[tuple[int, int, float]]:
    """As graph.memories_of_nodes."""
    if not node_ids:
        return []
    arms = " UNION ALL ".join(
        f"(SELECT {k} AS arm, source_memory_id, confidence, row_number() OVER"
        f" (ORDER BY confidence DESC, source_memory_id DESC) AS rank FROM {table}"
        f" WHERE {column} = n.node ORDER BY confidence DESC, source_memory_id DESC LIMIT %(limit)s)"
        for k, (table, column) in enumerate(_NODE_ARMS))
    found: dict[tuple[int, int], float] = {}
    for node, memory_id, confidence in conn.sql(
            "SELECT n.node, m.source_memory_id, m.confidence FROM unnest(%(nodes)s::bigint[])"
            f" WITH ORDINALITY AS n(node, place) CROSS JOIN LATERAL ({arms}) m"
            " ORDER BY n.place, m.arm, m.rank", {"nodes": list(node_ids), "limit": limit}):
        found[(node, memory_id)] = max(confidence, found.get((node, memory_id), 0.0))
    return [(node, memory, confidence) for (node, memory), confidence in found.items()]


def node_memory_counts(conn: PgConnection, node_ids: Sequence[int], cap: int) -> dict[int, int]:
    """As graph.node_memory_counts."""
    if not node_ids:
        return {}
    counted = dict(conn.sql(
        "SELECT n.node, (SELECT COUNT(*) FROM (SELECT DISTINCT source_memory_id FROM ("
        " SELECT source_memory_id FROM graph_edges WHERE src_node_id = n.node"
        " UNION ALL SELECT source_memory_id FROM graph_edges WHERE dst_node_id = n.node) AS touching"
        " LIMIT %(cap)s) AS capped) FROM unnest(%(nodes)s::bigint[]) AS n(node)",
        {"nodes": list(node_ids), "cap": cap}).fetchall())
    return {node: counted[node] for node in node_ids}


def neighbours(conn: PgConnection, node_ids: Sequence[int], limit: int) -> list[int]:
    """As graph.neighbours."""
    if not node_ids or limit <= 0:
        return []
    strength: dict[int, float] = {}
    for other, weight in conn.sql(
            "SELECT e.other, e.weight FROM unnest(%(nodes)s::bigint[]) WITH ORDINALITY AS n(node, place)"
            " CROSS JOIN LATERAL ("
            "(SELECT 0 AS arm, dst_node_id AS other, weight, row_number() OVER (ORDER BY weight DESC,"
            " dst_node_id) AS rank FROM graph_edges WHERE src_node_id = n.node"
            " ORDER BY weight DESC, dst_node_id LIMIT %(limit)s) UNION ALL"
            " (SELECT 1, src_node_id, weight, row_number() OVER (ORDER BY weight DESC, src_node_id)"
            " FROM graph_edges WHERE dst_node_id = n.node ORDER BY weight DESC, src_node_id LIMIT %(limit)s)"
            ") e ORDER BY n.place, e.arm, e.rank", {"nodes": list(node_ids), "limit": limit}):
        strength[other] = max(weight, strength.get(other, 0.0))
    hits = set(node_ids)
    return [n for n, _ in sorted(strength.items(), key=lambda kv: -kv[1]) if n not in hits][:limit]


class PostgresGraph(PortableGraph):
    def replace_for_memory(self, memory_id: int, persona_id: str | None, graph: MemoryGraph,
                           content_hash: str, now: float) -> list[int]:
        return self._run.write(replace_for_memory, memory_id, persona_id, graph, content_hash, now)

    def delete_for_memory(self, memory_id: int) -> dict[str, int]:
        return self._run.write(graph_delete_for_memory, memory_id)

    def entries_of_atoms(self, atom_ids: Sequence[int]) -> list[int]:
        return self._run.read(entries_of_atoms, atom_ids)

    def delete_entries(self, entry_ids: Sequence[int]) -> dict[str, int]:
        return self._run.write(delete_entries, entry_ids)

    def search_entries(self, terms: Sequence[str], persona_id: str | None, limit: int) -> list[Record]:
        return self._run.rows(search_entries, terms, persona_id, limit)

    def nodes_named(self, canonicals: Sequence[str], persona_id: str | None, limit: int) -> list[int]:
        return self._run.read(nodes_named, canonicals, persona_id, limit)

    def entity_nodes_named(self, canonicals: Sequence[str], persona_id: str | None) -> dict[str, list[int]]:
        return self._run.read(entity_nodes_named, canonicals, persona_id)

    def related(self, node_ids: Sequence[int], forward: Sequence[str], backward: Sequence[str],
                limit: int) -> list[tuple[int, float]]:
        return self._run.read(related, node_ids, forward, backward, limit)

    def neighbours(self, node_ids: Sequence[int], limit: int) -> list[int]:
        return self._run.read(neighbours, node_ids, limit)

    def memories_of_nodes(self, node_ids: Sequence[int], limit: int) -> list[tuple[int, int, float]]:
        return self._run.read(memories_of_nodes, node_ids, limit)

    def node_memory_counts(self, node_ids: Sequence[int], cap: int) -> dict[int, int]:
        return self._run.read(node_memory_counts, node_ids, cap)

    def entry_nodes(self, entry_ids: Sequence[int]) -> list[int]:
        return self._run.read(entry_nodes, entry_ids)

    def entry_ids_of_memories(self, memory_ids: Sequence[int]) -> list[int]:
        return self._run.read(entry_ids_of_memories, memory_ids)

    def memory_confidence(self, memory_ids: Sequence[int]) -> dict[int, float]:
        return self._run.read(memory_confidence, memory_ids)

    def memories_with_output(self, memory_ids: Sequence[int]) -> set[int]:
        return self._run.read(memories_with_output, memory_ids)

    def table_counts(self) -> dict[str, int]:
        return self._run.read(graph_table_counts)
