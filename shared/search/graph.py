"""The graph route's two channels: keyword (entries, nodes, neighbours) and vector (entries).

Both return a ranking of memories: every hit traces back to its source memory.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from shared.config import RetrievalConfig
from shared.search.bm25 import squash
from shared.search.channel import GRAPH_ROUTE
from shared.search.fuse import ordered
from shared.search.query import Query
from shared.search.relation_route import chains, named_entities, resolve
from shared.search.vectors import ScopeIds, VectorIndex, cosine_to_unit, is_scoped
from shared.store.interface import Session, Store
from shared.store.model.documents import DocumentFilter

# A hub node (a person in every memory) must not drag thousands of memories in.
MEMORIES_PER_EXPANSION = 200
# The entities a question's relations lead to ("Tomas's fiancée" -> Mei) weigh as an entry the
# question's own words found: the question is about them.
RELATION_TARGET_WEIGHT = 1.0


def graph_taken_in(store: Session, ids: Sequence[int]) -> set[int]:
    """Memories the graph has taken in: their graph stage is done (they may have no entries),
    or they have entries."""
    done = store.stages.done_among(ids, "graph")
    return done | store.graph.memories_with_output([i for i in ids if i not in done])


class _Points:
    """Entry points per memory: (kind, id) -> weight."""

    def __init__(self):
        self.points: dict[int, dict[tuple[str, int], float]] = defaultdict(dict)

    def add(self, memory_id: int, point: tuple[str, int], weight: float) -> None:
        mine = self.points[memory_id]
        mine[point] = max(weight, mine.get(point, 0.0))

    def ranking(self, boost: float) -> list[tuple[int, float]]:
        """Best weight per memory, times (1 + boost) for every extra entry point; divided by
        the best when that exceeds 1, so scores stay in [0, 1] as every channel's do (the
        fusion, zscore, min-max or rrf, ignores a common scale: only explain sees the difference)."""
        scores = {mid: max(p.values()) * (1 + boost * (len(p) - 1)) for mid, p in self.points.items()}
        top = max(scores.values(), default=1.0)
        return ordered({mid: score / top for mid, score in scores.items()} if top > 1 else scores)


class GraphKeywordChannel:
    """Graph entries holding the query's terms, entities named by them (and by multi-word
    names), the entities the question's relations lead to, and their neighbours."""

    name, route, needs_vector = "graph_keyword", GRAPH_ROUTE, False

    def __init__(self, store: Store, config: RetrievalConfig, aliases: dict[str, str] | None = None):
        self.store = store
        self.config = config
        self.aliases = aliases or {}
        self.weight = config.graph_keyword_weight

    def search(self, query: Query, scope: DocumentFilter, depth: int) -> list[tuple[int, float]]:
        c = self.config
        terms = query.terms
        if not terms:
            return []
        s = self.store
        # Nodes belong to one persona, so a node's share is of that persona's memories: a
        # speaker in every turn of a conversation is in 100% of them, not 20% of the store.
        # Archived ones count as the node counts do (and the count stays on the index).
        total = max(s.documents.count_in(DocumentFilter(persona_id=scope.persona_id, include_archived=True)), 1)
        points = _Points()
        names = list(terms) + named_entities(query.text, self.aliases)
        hit_nodes: set[int] = set(s.graph.nodes_named(names, scope.persona_id, c.graph_expansion_limit))
        targets = self._relation_targets(s, query, scope.persona_id)
        self._add_node_memories(s, points, targets, "relation", RELATION_TARGET_WEIGHT, total)
        entries = s.graph.search_entries(terms, scope.persona_id, depth)
        for entry_id, memory_id, raw, _ in entries:
            points.add(memory_id, ("entry", entry_id), c.graph_entry_weight * squash(raw))
        hit_nodes |= set(s.graph.entry_nodes([e[0] for e in entries]))
        self._add_node_memories(s, points, hit_nodes, "node", c.graph_node_weight, total)
        budget = c.graph_expansion_limit
        frontier, seen = sorted(hit_nodes), set(hit_nodes)
        for hop, weight in ((1, c.graph_hop1_weight), (2, c.graph_hop2_weight)):
            if hop > c.graph_expansion_hops or budget <= 0:
                break
            frontier = [n for n in s.graph.neighbours(frontier, budget) if n not in seen]
            seen.update(frontier)
            budget -= len(frontier)
            self._add_node_memories(s, points, frontier, f"hop{hop}", weight, total)
        return self._in_scope(points, scope, depth)

    def relation_memories(self, query: Query, scope: DocumentFilter) -> dict[int, float]:
        """{memory: weight} for the memories about the entities the question's relations lead
        to: the resolution's confidence times the entity's specificity (a hub weighs nothing)."""
        s = self.store
        targets = self._relation_targets(s, query, scope.persona_id)
        if not targets:
            return {}
        total = max(s.documents.count_in(DocumentFilter(persona_id=scope.persona_id, include_archived=True)), 1)
        points = _Points()
        self._add_node_memories(s, points, targets, "relation", 1.0, total)
        admitted = s.documents.filter_ids(list(points.points), scope)
        return {m: max(p.values()) for m, p in points.points.items() if m in admitted}

    def _relation_targets(self, s: Session, query: Query, persona_id: str | None) -> dict[int, float]:
        """{node: confidence} of the entities the question's relation chains resolve to (once
        per recall: search and relation_memories both ask)."""
        def resolved() -> dict[int, float]:
            targets: dict[int, float] = {}
            for chain in chains(query.text, self.aliases):
                for node, confidence in resolve(s, chain, persona_id):
                    targets[node] = max(confidence, targets.get(node, 0.0))
            return targets
        return query.derived("relation_targets", resolved)

    def strength(self, query: Query, ranking: Sequence[tuple[int, float]]) -> float:
        """The best memory's weight (entries, named nodes and neighbours, by specificity)."""
        return max((s for _, s in ranking), default=0.0)

    def indexed(self, ids: Sequence[int]) -> set[int]:
        return graph_taken_in(self.store, ids)

    def _add_node_memories(self, s: Session, points: _Points, nodes: list[int] | set[int] | dict[int, float], kind: str,
                           weight: float, total: int) -> None:
        """Points for the memories about nodes, by each node's specificity (and, for a dict of
        nodes, its confidence)."""
        confidence: dict[int, float] = nodes if isinstance(nodes, dict) else {}
        nodes = sorted(nodes)
        specificity = self._specificity(s, nodes, total)
        for node_id, memory_id, _ in s.graph.memories_of_nodes(nodes, MEMORIES_PER_EXPANSION):
            points.add(memory_id, (kind, node_id), weight * specificity[node_id] * confidence.get(node_id, 1.0))

    @staticmethod
    def _specificity(s: Session, nodes: list[int], total: int) -> dict[int, float]:
        """IDF of a node over memories, scaled to [0, 1]: a person named in every memory of a
        conversation says little about which memory a question is about (as BM25 does for
        terms). Counting stops at a cap, so hubs cost no more than that."""
        cap = max(total // 4, 50)
        counts = s.graph.node_memory_counts(nodes, cap)
        top = math.log(total + 1)
        return {n: max(0.0, math.log((total + 1) / (counts[n] + 1))) / top if top else 1.0 for n in nodes}

    def _in_scope(self, points: _Points, scope: DocumentFilter, limit: int) -> list[tuple[int, float]]:
        ranking = points.ranking(self.config.graph_multi_entry_boost)
        admitted = self.store.documents.filter_ids([m for m, _ in ranking], scope)
        return [(m, s) for m, s in ranking if m in admitted][:limit]


class GraphVectorChannel:
    """Nearest graph entries to the query vector, folded onto their source memories."""

    name, route, needs_vector = "graph_vector", GRAPH_ROUTE, True

    def __init__(self, store: Store, index: VectorIndex, weight: float):
        self.store = store
        self.index = index
        self.weight = weight
        self.scope_ids = ScopeIds(store, self._entry_ids_in_scope)

    def _entry_ids_in_scope(self, scope: DocumentFilter) -> list[int]:
        return self.store.graph.entry_ids_of_memories(self.store.documents.ids_in_scope(scope))

    def search(self, query: Query, scope: DocumentFilter, depth: int) -> list[tuple[int, float]]:
        self.index.sync()
        if not len(self.index):
            return []
        allowed = self.scope_ids.get(scope) if is_scoped(scope) else None
        hits = self.index.search(query.vector(), depth * 3, allowed=allowed)
        owners = self.store.graph.entries_memories([e for e, _ in hits])
        best: dict[int, float] = {}
        for entry_id, cosine in hits:
            if entry_id in owners:
                memory_id = owners[entry_id][0]
                best[memory_id] = max(best.get(memory_id, 0.0), cosine_to_unit(cosine))
        admitted = self.store.documents.filter_ids(list(best), scope)
        return [(m, s) for m, s in ordered(best) if m in admitted][:depth]

    def strength(self, query: Query, ranking: Sequence[tuple[int, float]]) -> float | None:
        """The best entry's cosine; None while no entry in scope has a vector yet."""
        return max((2.0 * s - 1.0 for _, s in ranking), default=None)

    def indexed(self, ids: Sequence[int]) -> set[int]:
        return graph_taken_in(self.store, ids)
