"""Recall: the dual-route hybrid retrieval.

Document route: BM25 and vector channels (run concurrently) -> RRF -> normalised ->
    a * rrf + b * importance + g * recency.
Graph route: graph-keyword and graph-vector channels -> RRF -> normalised ->
    (0.55 rrf + 0.20 importance + 0.15 recency + 0.10 confidence) * temporal factor of atoms.
Routes: each normalised, weighted by intent-routed weights, +bonus when both found a memory;
then MMR re-ranking. Every weight comes from RetrievalConfig.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Callable

from shared.config import RetrievalConfig
from shared.decay import DAY, recency
from shared.embedders import Embedder
from shared.errors import AokunError
from shared.search.bm25 import Bm25Channel
from shared.search.cache import RecallCache
from shared.search.focus import focus
from shared.search.fuse import fuse_routes, normalise, ordered, rrf, spread, weighted_minmax
from shared.search.graph import GraphKeywordChannel, GraphRanking, GraphVectorChannel
from shared.search.intent import route_weights
from shared.search.mmr import jaccard, mmr
from shared.search.vectors import MAX_QUERY_CHARS, VectorChannel
from shared.store import atoms, runtime
from shared.store.documents import Document, DocumentFilter, DocumentStore

log = logging.getLogger("aokun.recall")


@dataclass(frozen=True)
class RecallRequest:
    query: str
    k: int
    scope: DocumentFilter
    explain: bool = False


@dataclass(frozen=True)
class Hit:
    document: Document
    score: float
    explain: dict | None = None


@dataclass
class Channels:
    """The enabled channels (None = switched off in retrieval.channels)."""

    bm25: Bm25Channel | None = None
    vector: VectorChannel | None = None
    graph_keyword: GraphKeywordChannel | None = None
    graph_vector: GraphVectorChannel | None = None
    embedder: Embedder | None = None
    """Embeds the query once for both vector channels."""


@dataclass
class _Found:
    document: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    graph: dict[str, GraphRanking] = field(default_factory=dict)


class Recaller:
    """Runs the channels concurrently and fuses them; caches answers per write epoch."""

    def __init__(self, store: DocumentStore, channels: Channels, config: RetrievalConfig,
                 executor: ThreadPoolExecutor | None = None, clock: Callable[[], float] = time.time):
        self.store = store
        self.channels = channels
        self.config = config
        self.executor = executor or ThreadPoolExecutor(max_workers=2, thread_name_prefix="recall")
        self.clock = clock
        self.cache = RecallCache(config.cache_ttl_s, config.cache_size) if config.cache_enabled else None

    def recall(self, request: RecallRequest) -> list[Hit]:
        if self.cache is None:
            return self._recall(request)
        epoch = runtime.recall_epoch(self.store.db.connection())
        key = (request.query, request.k, request.scope, request.explain)
        hits = self.cache.get(key, epoch)
        if hits is None:
            hits = self._recall(request)
            self.cache.put(key, epoch, hits)
        return hits

    # -- channels -------------------------------------------------------------------------

    def _recall(self, request: RecallRequest) -> list[Hit]:
        if self.config.query_focus:
            request = replace(request, query=focus(request.query))
        found = self._run_channels(request, max(self.config.candidate_depth, request.k))
        candidates = {i for r in found.document.values() for i, _ in r}
        candidates |= {i for g in found.graph.values() for i, _ in g.ranking}
        documents = self.store.get_many(sorted(candidates))
        if not documents:
            return []
        return _Fusion(self.config, documents, found, self._temporal(documents), self.clock(),
                       request).hits(self.store.terms_of)

    def _run_channels(self, request: RecallRequest, depth: int) -> _Found:
        """Two lanes, one per core: the query embedding and the vector searches that need it
        in a pool thread; BM25 and graph keywords (SQLite) meanwhile in this thread. More
        threads only slow the embedding down on a two-core machine."""
        c = self.channels
        vector_lane = self.executor.submit(self._vector_lane, request, depth) \
            if c.vector or c.graph_vector else None
        found = _Found()
        for name, channel in (("bm25", c.bm25), ("graph_keyword", c.graph_keyword)):
            if channel:
                self._collect(found, name, lambda ch=channel: ch.search(request.query, request.scope, depth))
        if vector_lane is not None:
            for name, outcome in vector_lane.result():
                self._collect(found, name, outcome)
        return found

    def _collect(self, found: _Found, name: str, run: Callable) -> None:
        try:
            result = run()
        except AokunError as exc:
            if not self.config.fallback_enabled:
                raise
            log.warning("%s channel failed, the others serve: %s", name, exc)
            return
        if result is None:
            return
        if isinstance(result, GraphRanking):
            found.graph[name] = result
        else:
            found.document[name] = result

    def _vector_lane(self, request: RecallRequest, depth: int) -> list[tuple[str, Callable]]:
        """Embed the query once, search both vector spaces; each outcome as a thunk that
        returns the result or raises the channel's error (so _collect treats all alike)."""
        lanes = [(n, ch) for n, ch in (("vector", self.channels.vector),
                                       ("graph_vector", self.channels.graph_vector)) if ch]
        try:
            vector = self._embed(request.query)
        except AokunError as exc:
            return [(name, _raiser(exc)) for name, _ in lanes]
        outcomes = []
        for name, channel in lanes:
            try:
                if vector is None:
                    result = None
                elif name == "vector":
                    result = channel.search_vector(vector, request.scope, depth)
                else:
                    result = channel.search(vector, request.scope, depth)
            except AokunError as exc:
                outcomes.append((name, _raiser(exc)))
                continue
            outcomes.append((name, lambda r=result: r))
        return outcomes

    def _embed(self, query: str):
        indexes = [ch.index for ch in (self.channels.vector, self.channels.graph_vector) if ch]
        for index in indexes:
            index.sync()
        if not any(len(index) for index in indexes):
            return None  # nothing embedded yet: skip the query embedding
        return self.channels.embedder.embed_query(query[:MAX_QUERY_CHARS])

    def _temporal(self, documents: dict[int, Document]) -> dict[int, float]:
        return atoms.temporal_factors(self.store.db.connection(), list(documents), self.clock())


class _Fusion:
    """Scores one request's candidates; keeps the parts for explain."""

    def __init__(self, config: RetrievalConfig, documents: dict[int, Document], found: _Found,
                 temporal: dict[int, float], now: float, request: RecallRequest):
        self.c, self.documents, self.found, self.temporal = config, documents, found, temporal
        self.now, self.request = now, request
        self.parts: dict[int, dict] = {i: {} for i in documents}

    def hits(self, terms_of: Callable) -> list[Hit]:
        weights = route_weights(self.request.query, self.c)
        document_route = self._document_route()
        graph_route = self._graph_route()
        fused = [(i, s) for i, s in fuse_routes(document_route, graph_route, weights.document,
                                                weights.graph, self.c.both_routes_bonus)
                 if i in self.documents]
        order = self._diversify(fused, terms_of)
        score = dict(fused)
        return [Hit(self.documents[i], score[i],
                    self._explain(i, weights, score[i]) if self.request.explain else None)
                for i in order]

    def _meta(self, doc_id: int) -> tuple[float, float]:
        doc = self.documents[doc_id]
        last = max(doc.create_time, doc.last_access_time or 0.0)
        return doc.fields.importance, recency((self.now - last) / DAY, self.c.recency_days)

    def _document_route(self) -> list[tuple[int, float]]:
        found = self.found.document
        if self.c.doc_fusion == "rrf":
            fused_list = rrf(list(found.values()), self.c.rrf_k)
        else:
            weights = {"bm25": self.c.bm25_weight, "vector": self.c.vector_weight}
            fused_list = weighted_minmax(list(found.values()), [weights[name] for name in found])
        scores = {}
        for doc_id, fused in normalise(fused_list):
            if doc_id not in self.documents:
                continue
            importance, fresh = self._meta(doc_id)
            score = (self.c.doc_rrf_weight * fused + self.c.doc_importance_weight * importance
                     + self.c.doc_recency_weight * fresh)
            scores[doc_id] = score
            self.parts[doc_id]["document"] = {"fused": round(fused, 6), "importance": importance,
                                              "recency": round(fresh, 6), "score": round(score, 6)}
        return ordered(scores)

    def _graph_route(self) -> list[tuple[int, float]]:
        found = {name: g.ranking for name, g in self.found.graph.items()}
        if self.c.graph_fusion == "rrf":
            fused_list = rrf(list(found.values()), self.c.rrf_k)
        else:
            weights = {"graph_keyword": self.c.graph_keyword_weight, "graph_vector": self.c.graph_vector_weight}
            fused_list = weighted_minmax(list(found.values()), [weights[name] for name in found])
        confidence: dict[int, float] = {}
        for g in self.found.graph.values():
            for doc_id, value in g.confidence.items():
                confidence[doc_id] = max(value, confidence.get(doc_id, 0.0))
        scores = {}
        for doc_id, fused in normalise(fused_list):
            if doc_id not in self.documents:
                continue
            importance, fresh = self._meta(doc_id)
            factor = self.temporal.get(doc_id, 1.0)
            score = factor * (self.c.graph_rrf_weight * fused
                              + self.c.graph_importance_weight * importance
                              + self.c.graph_recency_weight * fresh
                              + self.c.graph_confidence_weight * confidence.get(doc_id, 0.0))
            scores[doc_id] = score
            self.parts[doc_id]["graph"] = {
                "fused": round(fused, 6), "importance": importance, "recency": round(fresh, 6),
                "confidence": confidence.get(doc_id, 0.0), "temporal_factor": round(factor, 6),
                "score": round(score, 6)}
        return ordered(scores)

    def _diversify(self, fused: list[tuple[int, float]], terms_of: Callable) -> list[int]:
        k = self.request.k
        if not self.c.mmr_enabled or len(fused) <= 1:
            return [i for i, _ in fused[:k]]
        pool = spread(fused[:max(3 * k, 30)])
        terms = terms_of([i for i, _ in pool])
        picked = mmr(pool, lambda a, b: jaccard(terms.get(a, ()), terms.get(b, ())),
                     self.c.mmr_lambda, k)
        return [i for i, _ in picked]

    def _explain(self, doc_id: int, weights, final: float) -> dict:
        channels = {}
        for name, ranking in self.found.document.items():
            channels.update(_rank_of(name, ranking, doc_id))
        for name, g in self.found.graph.items():
            channels.update(_rank_of(name, g.ranking, doc_id))
        parts = dict(self.parts[doc_id])
        parts["routes"] = {"document_weight": round(weights.document, 6),
                           "graph_weight": round(weights.graph, 6), "intents": list(weights.intents),
                           "both_routes_bonus": "document" in parts and "graph" in parts}
        parts["final"] = round(final, 6)
        parts["query"] = self.request.query
        return {"channels": channels, "parts": parts}


def _raiser(exc: Exception) -> Callable:
    def run():
        raise exc
    return run


def _rank_of(name: str, ranking, doc_id: int) -> dict:
    for rank, (other, score) in enumerate(ranking, start=1):
        if other == doc_id:
            return {name: {"rank": rank, "score": round(score, 6)}}
    return {}
