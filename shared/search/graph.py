"""The graph route's two channels: keyword (entries, nodes, neighbours) and vector (entries).

Both return a ranking of memories (every hit traces back to its source memory) and, per
memory, the best confidence of the graph output that led to it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from shared.config import RetrievalConfig
from shared.search.bm25 import MAX_QUERY_TERMS, match_expression, squash
from shared.search.fuse import ordered
from shared.search.vectors import ScopeIds, VectorIndex, cosine_to_unit, is_scoped
from shared.store import graph
from shared.store.documents import DocumentFilter, DocumentStore
from shared.text.segment import Segmenter

# A hub node (a person in every memory) must not drag thousands of memories in.
MEMORIES_PER_EXPANSION = 200


@dataclass
class GraphRanking:
    ranking: list[tuple[int, float]] = field(default_factory=list)
    confidence: dict[int, float] = field(default_factory=dict)


class _Points:
    """Entry points per memory: (kind, id) -> weight, and the best confidence seen."""

    def __init__(self):
        self.points: dict[int, dict[tuple[str, int], float]] = defaultdict(dict)
        self.confidence: dict[int, float] = {}

    def add(self, memory_id: int, point: tuple[str, int], weight: float, confidence: float) -> None:
        mine = self.points[memory_id]
        mine[point] = max(weight, mine.get(point, 0.0))
        self.confidence[memory_id] = max(confidence, self.confidence.get(memory_id, 0.0))

    def ranking(self, boost: float) -> list[tuple[int, float]]:
        """Best weight per memory, times (1 + boost) for every extra entry point."""
        return ordered({mid: max(p.values()) * (1 + boost * (len(p) - 1))
                        for mid, p in self.points.items()})


class GraphKeywordChannel:
    def __init__(self, store: DocumentStore, segmenter: Segmenter, config: RetrievalConfig):
        self.store = store
        self.segmenter = segmenter
        self.config = config

    def search(self, query: str, scope: DocumentFilter, limit: int) -> GraphRanking:
        c = self.config
        terms = self.segmenter.unique_terms(query, MAX_QUERY_TERMS)
        if not terms:
            return GraphRanking()
        conn = self.store.db.connection()
        total = max(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0], 1)
        points = _Points()
        hit_nodes: set[int] = set(graph.nodes_named(conn, terms, scope.persona_id, c.graph_expansion_limit))
        entries = graph.search_entries(conn, match_expression(terms), scope.persona_id, limit)
        for entry_id, memory_id, raw, confidence in entries:
            points.add(memory_id, ("entry", entry_id), c.graph_entry_weight * squash(raw), confidence)
        hit_nodes |= set(graph.entry_nodes(conn, [e[0] for e in entries]))
        self._add_node_memories(conn, points, hit_nodes, "node", c.graph_node_weight, total)
        budget = c.graph_expansion_limit
        frontier, seen = sorted(hit_nodes), set(hit_nodes)
        for hop, weight in ((1, c.graph_hop1_weight), (2, c.graph_hop2_weight)):
            if hop > c.graph_expansion_hops or budget <= 0:
                break
            frontier = [n for n in graph.neighbours(conn, frontier, budget) if n not in seen]
            seen.update(frontier)
            budget -= len(frontier)
            self._add_node_memories(conn, points, frontier, f"hop{hop}", weight, total)
        return self._in_scope(points, scope, limit)

    def _add_node_memories(self, conn, points: _Points, nodes, kind: str, weight: float,
                           total: int) -> None:
        nodes = sorted(nodes)
        specificity = self._specificity(conn, nodes, total)
        for node_id, memory_id, confidence in graph.memories_of_nodes(conn, nodes, MEMORIES_PER_EXPANSION):
            points.add(memory_id, (kind, node_id), weight * specificity[node_id], confidence)

    @staticmethod
    def _specificity(conn, nodes: list[int], total: int) -> dict[int, float]:
        """IDF of a node over memories, scaled to [0, 1]: a person named in every memory of a
        conversation says little about which memory a question is about (as BM25 does for
        terms). Counting stops at a cap, so hubs cost no more than that."""
        cap = max(total // 4, 50)
        counts = graph.node_memory_counts(conn, nodes, cap)
        top = math.log(total + 1)
        return {n: max(0.0, math.log((total + 1) / (counts[n] + 1))) / top if top else 1.0 for n in nodes}

    def _in_scope(self, points: _Points, scope: DocumentFilter, limit: int) -> GraphRanking:
        ranking = points.ranking(self.config.graph_multi_entry_boost)
        admitted = self.store.filter_ids([m for m, _ in ranking], scope)
        kept = [(m, s) for m, s in ranking if m in admitted][:limit]
        return GraphRanking(kept, {m: points.confidence[m] for m, _ in kept})


class GraphVectorChannel:
    """Nearest graph entries to the query vector, folded onto their source memories."""

    def __init__(self, store: DocumentStore, index: VectorIndex):
        self.store = store
        self.index = index
        self.scope_ids = ScopeIds(store, self._entry_ids_in_scope)

    def _entry_ids_in_scope(self, scope: DocumentFilter) -> list[int]:
        return graph.entry_ids_of_memories(self.store.db.connection(), self.store.ids_in_scope(scope))

    def search(self, query_vector: np.ndarray, scope: DocumentFilter, limit: int) -> GraphRanking:
        allowed = self.scope_ids.get(scope) if is_scoped(scope) else None
        hits = self.index.search(query_vector, limit * 3, allowed=allowed)
        owners = graph.entries_memories(self.store.db.connection(), [e for e, _ in hits])
        best: dict[int, float] = {}
        confidence: dict[int, float] = {}
        for entry_id, cosine in hits:
            if entry_id not in owners:
                continue
            memory_id, entry_confidence = owners[entry_id]
            best[memory_id] = max(best.get(memory_id, 0.0), cosine_to_unit(cosine))
            confidence[memory_id] = max(confidence.get(memory_id, 0.0), entry_confidence)
        admitted = self.store.filter_ids(list(best), scope)
        ranking = [(m, s) for m, s in ordered(best) if m in admitted][:limit]
        return GraphRanking(ranking, {m: confidence[m] for m, _ in ranking})
