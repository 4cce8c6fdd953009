"""Rank fusion and score combination as pure functions over (id, score) lists, best first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

Ranking = Sequence[tuple[int, float]]


def rrf(rankings: Sequence[Ranking], k: int = 60) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: score(d) = sum over lists of 1 / (k + rank), rank from 1.

    Ties keep the order in which ids were first seen, so the result is deterministic.
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, (doc_id, _) in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    return ordered(scores)


def ordered(scores: Mapping[int, float]) -> list[tuple[int, float]]:
    """Best first; ties keep insertion order."""
    position = {doc_id: i for i, doc_id in enumerate(scores)}
    return sorted(scores.items(), key=lambda item: (-item[1], position[item[0]]))


def normalise(ranking: Ranking) -> list[tuple[int, float]]:
    """Scores divided by the best one, so the top is 1.0 (an empty or all-zero list is kept)."""
    top = max((score for _, score in ranking), default=0.0)
    if top <= 0:
        return list(ranking)
    return [(doc_id, score / top) for doc_id, score in ranking]


def spread(ranking: Ranking) -> list[tuple[int, float]]:
    """Min-max rescaling to [0, 1]. Fused scores share constant parts (importance, recency)
    that squeeze their range; MMR weighs relevance against a similarity in [0, 1], so it
    needs relevance on that scale too. A flat list becomes all 1.0."""
    if not ranking:
        return []
    low, high = min(s for _, s in ranking), max(s for _, s in ranking)
    if high - low <= 1e-12:
        return [(doc_id, 1.0) for doc_id, _ in ranking]
    return [(doc_id, (score - low) / (high - low)) for doc_id, score in ranking]


Pending = Sequence[AbstractSet[int]]  # per ranking: ids its channel has not indexed yet


def weighted_minmax(rankings: Sequence[Ranking], weights: Sequence[float],
                    pending: Pending = ()) -> list[tuple[int, float]]:
    """Score fusion: each ranking min-max scaled to [0, 1], then the weighted sum (an id a
    ranking lacks gets 0 from it). Unlike RRF it keeps how far ahead a strong match is.
    An id a channel has not indexed yet (`pending`) gets that ranking's best, 1.0."""
    return _weighted([spread(r) for r in rankings], weights, pending)


def _weighted(scaled: Sequence[Ranking], weights: Sequence[float], pending: Pending) -> list[tuple[int, float]]:
    """The weighted sum of scaled rankings; an id pending in a ranking's channel takes that
    ranking's best scaled score (its channel's silence is no evidence against it)."""
    scores: dict[int, float] = {}
    for ranking, weight in zip(scaled, weights):
        for doc_id, score in ranking:
            scores[doc_id] = scores.get(doc_id, 0.0) + weight * score
    for ranking, weight, waiting in zip(scaled, weights, pending):
        best = max((score for _, score in ranking), default=0.0)
        for doc_id in waiting:
            if doc_id in scores:
                scores[doc_id] += weight * best
    return ordered(scores)


def standardised(ranking: Ranking) -> list[tuple[int, float]]:
    """Each score as standard deviations above the list's lowest: (score - min) / stdev.
    Channels score on different scales and spreads (BM25 runs far ahead on a rare word,
    cosines sit close together); dividing by the list's own spread puts them on one scale
    while keeping how far a strong match stands out, which min-max scaling to [0, 1] loses.
    A list of fewer than two scores, or a flat one, gives 1.0 to each (nothing to tell apart)."""
    if len(ranking) < 2:
        return [(doc_id, 1.0) for doc_id, _ in ranking]
    scores = [s for _, s in ranking]
    mean = sum(scores) / len(scores)
    deviation = (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5
    if deviation <= 1e-12:
        return [(doc_id, 1.0) for doc_id, _ in ranking]
    low = min(scores)
    return [(doc_id, (score - low) / deviation) for doc_id, score in ranking]


def weighted_zscore(rankings: Sequence[Ranking], weights: Sequence[float],
                    pending: Pending = ()) -> list[tuple[int, float]]:
    """Score fusion on each channel's own scale: every ranking standardised, then the
    weighted sum (an id a ranking lacks gets 0 from it, as its weakest candidate does; an id
    its channel has not indexed yet, `pending`, gets the ranking's best)."""
    return _weighted([standardised(r) for r in rankings], weights, pending)


def fuse_routes(document: Ranking, graph: Ranking, document_weight: float, graph_weight: float,
                both_bonus: float, graph_pending: AbstractSet[int] = frozenset()) -> list[tuple[int, float]]:
    """Dual-route fusion: each route normalised to its best, weighted, plus a bonus for
    memories both routes found, capped at 1.0. Weights are used as given (callers
    normalise them). A memory the graph has not taken in yet (`graph_pending`) counts as
    found by the graph route as well as by the document route."""
    doc, gra = dict(normalise(document)), dict(normalise(graph))
    if graph:
        gra.update({i: doc[i] for i in graph_pending if i in doc and i not in gra})
    combined: dict[int, float] = {}
    for doc_id in list(doc) + [i for i in gra if i not in doc]:
        score = document_weight * doc.get(doc_id, 0.0) + graph_weight * gra.get(doc_id, 0.0)
        if doc_id in doc and doc_id in gra:
            score += both_bonus
        combined[doc_id] = min(score, 1.0)
    return ordered(combined)


# The score fusions by their config name (retrieval.doc_fusion / graph_fusion); "rrf", the
# third of shared.config.FUSIONS, fuses ranks, not scores, and takes no weights.
SCORE_FUSIONS = {"zscore": weighted_zscore, "score": weighted_minmax}
