"""The panel's graph reads on PostgreSQL (shared/store/graph_browse.py), where their SQL
differs from SQLite's: a type prefix matched with starts_with, and the order SQLite's GROUP BY
gives written out.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.store.model import graph
from shared.store.model.record import Record
from shared.store.portable.aggregates import PortableGraphBrowse
from shared.store.postgres.connection import PgConnection


def persona_node_counts(conn: PgConnection, persona_id: str) -> dict[str, int]:
    """As graph_browse.persona_node_counts; the key's type prefix is matched with starts_with,
    which no database collation reorders (a range 'person:' <= key < 'person;' holds only in
    byte order, SQLite's)."""
    return {t: conn.sql("SELECT COUNT(*) FROM graph_nodes WHERE persona_id = %s AND starts_with(key, %s)",
                        (persona_id, f"{t}:")).fetchone()[0] for t in graph.NODE_TYPES}


def edges_among(conn: PgConnection, node_ids: Sequence[int]) -> list[Record]:
    """As graph_browse.edges_among, in the group order SQLite's GROUP BY gives (NULL relations
    first, text in byte order)."""
    if not node_ids:
        return []
    return conn.sql(
        "SELECT src_node_id, dst_node_id, type, relation, COUNT(DISTINCT source_memory_id) FROM graph_edges"
        " WHERE src_node_id = ANY(%s) AND dst_node_id = ANY(%s) GROUP BY 1, 2, 3, 4"
        ' ORDER BY src_node_id, dst_node_id, type COLLATE "C", relation COLLATE "C" NULLS FIRST',
        (list(node_ids), list(node_ids))).fetchall()


def node_links(conn: PgConnection, node_id: int, limit: int) -> list[Record]:
    """As graph_browse.node_links; memory_ids joined in ascending order (SQLite's group_concat
    gives no order; the panel sorts them)."""
    return conn.sql(
        "SELECT n.id, n.type, n.value, l.edge_type, COUNT(DISTINCT l.memory_id) AS memories,"
        " array_to_string(array_agg(DISTINCT l.memory_id ORDER BY l.memory_id), ',') AS memory_ids FROM ("
        " SELECT dst_node_id AS other, type AS edge_type, source_memory_id AS memory_id"
        " FROM graph_edges WHERE src_node_id = %s UNION ALL"
        " SELECT src_node_id, type, source_memory_id FROM graph_edges WHERE dst_node_id = %s) l"
        " JOIN graph_nodes n ON n.id = l.other GROUP BY n.id, l.edge_type"
        " ORDER BY memories DESC, n.id DESC LIMIT %s", (node_id, node_id, limit)).fetchall()


class PostgresGraphBrowse(PortableGraphBrowse):
    def persona_node_counts(self, persona_id: str) -> dict[str, int]:
        return self._run.read(persona_node_counts, persona_id)

    def edges_among(self, node_ids: Sequence[int]) -> list[Record]:
        return self._run.rows(edges_among, node_ids)

    def node_links(self, node_id: int, limit: int) -> list[Record]:
        return self._run.rows(node_links, node_id, limit)
