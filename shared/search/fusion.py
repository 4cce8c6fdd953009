"""The fusion of one recall: the dual-route hybrid retrieval.

Channels (shared/search/channel.py) feed two routes; each channel returns its top
candidate_depth (id, score) pairs within the recall's scope.
Document route: BM25 (a memory's own words, and at bm25_context_weight the words of the
    memories just before it in its conversation) and dense vectors (memories embedded with
    that context). Fused by retrieval.doc_fusion, by default zscore: each channel's scores
    standardised by their own spread, weighted (bm25_weight, vector_weight), summed; then
    normalised and combined as a * fused + b * importance + g * recency.
Graph route: keyword (entries, nodes named in the query, their neighbours; a node's weight is
    its specificity within the persona) and vector (entries), fused the same way (graph_fusion);
    then (a * fused + b * importance + g * recency + d * confidence) x temporal factor of the
    memory's atoms.
Routes: each normalised, weighted by intent-routed weights, + a bonus when both found a
memory. Then what a memory's atoms and turn say: a question about likes or plans (preference /
plan cues) adds atom_type_boost to the memories holding a still-valid preference / planned
atom; a question that names an entity and a relation (Tomas's fiancée, 王芳的丈夫) adds
relation_boost to the memories about the entity it leads to; a turn by someone the question
names gains named_speaker_boost; a turn that asks loses question_turn_penalty (the turn
answering it states the fact). A question about a window of time (next week, 明天, recently) or
a window the caller gives ranks what happens inside it first (shared/search/happening.py).
MMR re-ranking is available and off
by default (mmr_enabled); RRF is an alternative fusion. Every weight comes from
RetrievalConfig. The Recaller (shared/search/recall.py) runs the channels and hands what they
found to a Fusion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from shared.config import RetrievalConfig
from shared.decay import recency
from shared.search import calibration, happening, timeframe
from shared.search.channel import DOCUMENT_ROUTE, GRAPH_ROUTE, Channel, Notes
from shared.search.focus import asks, speaker
from shared.search.fuse import SCORE_FUSIONS, Ranking, fuse_routes, normalise, ordered, rrf, spread
from shared.search.intent import RouteWeights, has_cue, route_weights
from shared.search.mmr import mmr
from shared.search.request import Hit, RecallRequest
from shared.store.model.documents import Document, unmarked
from shared.text.overlap import jaccard
from shared.text.passages import describe_passage
from shared.units import DAY

# The store's terms_of: {memory: its indexed terms} (what MMR compares memories by).
TermsOf = Callable[[Sequence[int]], Mapping[int, Sequence[str]]]


@dataclass
class Found:
    """Each channel's ranking, by route."""

    rankings: dict[str, list[tuple[int, float]]] = field(default_factory=dict[str, list[tuple[int, float]]])
    channels: dict[str, Channel] = field(default_factory=dict[str, Channel])
    notes: Notes = field(default_factory=Notes)  # channel.note's, for explain

    def route(self, route: str) -> list[tuple[Channel, list[tuple[int, float]]]]:
        return [(self.channels[n], r) for n, r in self.rankings.items() if self.channels[n].route == route]


class Fusion:
    """Scores one request's candidates; keeps the parts for explain."""

    def __init__(self, config: RetrievalConfig, documents: dict[int, Document], found: Found,
                 temporal: dict[int, float], confidence: dict[int, float], now: float,
                 request: RecallRequest, pending: dict[str, set[int]], strongest: dict[str, float],
                 scoring: calibration.Calibration, typed: AbstractSet[int] = frozenset(),
                 related: dict[int, float] | None = None, replaced: dict[int, int] | None = None):
        self.c, self.documents, self.found, self.temporal = config, documents, found, temporal
        self.confidence, self.now, self.request, self.pending = confidence, now, request, pending
        self.strongest = strongest  # per channel that answered: Channel.strength
        self.scoring = scoring
        self.typed = typed  # memories holding an atom of a type the query asks about
        self.related = related or {}  # memories about what the query's relations lead to: weight
        self.replaced = replaced or {}  # memory whose every atom a later one superseded: that one
        self.named: dict[str, bool] = {}  # speaker: whether the query names them
        self.asked: timeframe.TimeQuestion | None = None  # the window on when things happen
        self.within: dict[int, float] = {}  # the candidates happening inside it: when, first
        self.listed: list[int] = []  # found for the window alone, by date
        # Whether the question asks about people the store never mentions: a store lookup per
        # person, so asked only where it decides something (the floor is on) or is shown.
        self.none_mentioned: Callable[[], bool] = lambda: False
        self.parts: dict[int, dict[str, Any]] = {i: {} for i in documents}  # explain's, as Hit.explain

    def hits(self, terms_of: TermsOf) -> list[Hit]:
        """The candidates scoring at least min_score, best first, duplicates folded, at most k.
        Scores are probabilities of relevance (shared/search/calibration.py), in fused order."""
        weights = route_weights(self.request.query, self.c)
        fused = normalise(self.fused(weights))
        if self.asked is not None:
            fused = happening.arranged(fused, self.within, self.asked, self.listed)
        score = self.scoring.probabilities(fused, self.strongest)
        if self.asked is not None:
            score = happening.lifted(score, self.within, self.asked)
        if not fused or score[fused[0][0]] < self.request.min_best_score or not self._answerable():
            return []
        ranked = [(i, score[i]) for i, _ in fused if score[i] >= self.request.min_score]
        ranked, duplicates = fold_duplicates(ranked, self.documents)
        order = self._diversify(ranked, terms_of)
        return [Hit(self.documents[i], score[i],
                    self._explain(i, weights, score[i]) if self.request.explain else None,
                    duplicates.get(i, ()))
                for i in order]

    def _answerable(self) -> bool:
        """Whether the store likely holds an answer: what happens inside a time window the
        question names answers it by itself; a question about people the store never mentions
        has none (while the question-level floor is on); otherwise the question-level model
        decides."""
        if self.asked is not None and self.within:
            return True
        if self.request.min_answerable > 0 and self.unmentioned:
            return False
        return self.answerable >= self.request.min_answerable

    @cached_property
    def unmentioned(self) -> bool:
        return self.none_mentioned()

    @property
    def answerable(self) -> float:
        return self.scoring.answerable(self.strongest)

    def fused(self, weights: RouteWeights | None = None) -> list[tuple[int, float]]:
        """The routes' fusion of rankings, best first. A memory the graph has not taken in
        yet counts as found by the graph route too (no evidence is not evidence against)."""
        weights = weights or route_weights(self.request.query, self.c)
        graph_channels = [ch.name for ch, _ in self.found.route(GRAPH_ROUTE)]
        graph_pendings = [self.pending.get(n, set[int]()) for n in graph_channels]
        graph_pending = graph_pendings[0].intersection(*graph_pendings[1:]) if graph_pendings else set[int]()
        routes = fuse_routes(self._document_route(), self._graph_route(), weights.document,
                             weights.graph, self.c.both_routes_bonus, graph_pending)
        return newer_first(ordered({i: max(0.0, s + self._shift(i)) for i, s in routes if i in self.documents}),
                           self.replaced)

    def _shift(self, doc_id: int) -> float:
        """What a memory's atoms and turn add to its fused score (module docstring)."""
        text = self.documents[doc_id].text
        shift = self.c.atom_type_boost if doc_id in self.typed else 0.0
        shift += self.c.relation_boost * self.related.get(doc_id, 0.0)
        who = speaker(text) if self.c.named_speaker_boost else None
        if who is not None:
            if who not in self.named:
                self.named[who] = has_cue(self.request.query, [who])
            shift += self.c.named_speaker_boost if self.named[who] else 0.0
        if asks(text):
            shift -= self.c.question_turn_penalty
        return shift

    def _meta(self, doc_id: int) -> tuple[float, float]:
        doc = self.documents[doc_id]
        last = max(doc.create_time, doc.last_access_time or 0.0)
        return doc.fields.importance, recency((self.now - last) / DAY, self.c.recency_days)

    def _fused(self, route: str, method: str) -> list[tuple[int, float]]:
        """One route's channels fused: weighted standardised or min-max scores, or RRF."""
        found = self.found.route(route)
        if method == "rrf":
            return rrf([ranking for _, ranking in found], self.c.rrf_k)
        return SCORE_FUSIONS[method]([ranking for _, ranking in found], [ch.weight for ch, _ in found],
                       [self.pending.get(ch.name, set()) for ch, _ in found])

    def _document_route(self) -> list[tuple[int, float]]:
        fused_list = self._fused(DOCUMENT_ROUTE, self.c.doc_fusion)
        scores: dict[int, float] = {}
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
        fused_list = self._fused(GRAPH_ROUTE, self.c.graph_fusion)
        confidence = self.confidence
        scores: dict[int, float] = {}
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

    def _diversify(self, fused: list[tuple[int, float]], terms_of: TermsOf) -> list[int]:
        k = self.request.k
        if not self.c.mmr_enabled or len(fused) <= 1:
            return [i for i, _ in fused[:k]]
        pool = spread(fused[:max(3 * k, 30)])
        terms = terms_of([i for i, _ in pool])
        picked = mmr(pool, lambda a, b: jaccard(terms.get(a, ()), terms.get(b, ())),
                     self.c.mmr_lambda, k)
        return [i for i, _ in picked]

    def _explain(self, doc_id: int, weights: RouteWeights, final: float) -> dict[str, Any]:
        channels: dict[str, dict[str, Any]] = {}
        for name, ranking in self.found.rankings.items():
            channels.update(_rank_of(name, ranking, doc_id))
            detail = self.found.notes.get(name, {}).get(doc_id)
            if detail and name in channels:
                if "passage" in detail:  # which part of a long memory matched, and what it says
                    detail = describe_passage(self.documents[doc_id].text, detail["passage"])
                channels[name].update(detail)
        parts = dict(self.parts[doc_id])
        parts["routes"] = {"document_weight": round(weights.document, 6),
                           "graph_weight": round(weights.graph, 6), "intents": list(weights.intents),
                           "both_routes_bonus": "document" in parts and "graph" in parts,
                           "atom_type_boost": doc_id in self.typed, "replaced_by": self.replaced.get(doc_id),
                           "relation": round(self.related.get(doc_id, 0.0), 6), "shift": round(self._shift(doc_id), 6)}
        parts["strongest"] = {c: round(v, 6) for c, v in self.strongest.items()}
        parts["answerable"] = round(self.answerable, 6)
        parts["unmentioned"] = self.unmentioned
        if self.asked is not None:
            parts["window"] = {"start": self.asked.window.start, "end": self.asked.window.end,
                               "agenda": self.asked.agenda, "inside": doc_id in self.within,
                               "happens": self.within.get(doc_id)}
        parts["not_indexed_by"] = sorted(n for n, ids in self.pending.items() if doc_id in ids)
        parts["final"] = round(final, 6)
        parts["query"] = self.request.query
        return {"channels": channels, "parts": parts}


def newer_first(ranking: list[tuple[int, float]], replaced: dict[int, int]) -> list[tuple[int, float]]:
    """The ranking with each memory a later one replaced right below that one when both are in
    it: a newer memory ranked below the one it replaced takes its place and score."""
    order = list(ranking)
    for old, new in replaced.items():
        place = {doc_id: n for n, (doc_id, _) in enumerate(order)}
        if old in place and new in place and place[new] > place[old]:
            order.pop(place[new])
            order.insert(place[old], (new, order[place[old]][1]))
    return order


def fold_duplicates(ranking: list[tuple[int, float]], documents: dict[int, Document]
                    ) -> tuple[list[tuple[int, float]], dict[int, tuple[int, ...]]]:
    """The ranking with each memory whose text (without its time marker, case and spacing
    aside) repeats a better-ranked one's left out, and {kept id: the ids folded into it}."""
    first: dict[str, int] = {}
    kept: list[tuple[int, float]] = []
    folded: dict[int, list[int]] = {}
    for doc_id, score in ranking:
        key = " ".join(unmarked(documents[doc_id].text).casefold().split())
        if key in first:
            folded.setdefault(first[key], []).append(doc_id)
            continue
        first[key] = doc_id
        kept.append((doc_id, score))
    return kept, {i: tuple(ids) for i, ids in folded.items()}


def _rank_of(name: str, ranking: Ranking, doc_id: int) -> dict[str, dict[str, float]]:
    for rank, (other, score) in enumerate(ranking, start=1):
        if other == doc_id:
            return {name: {"rank": rank, "score": round(score, 6)}}
    return {}
