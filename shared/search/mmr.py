"""Maximal marginal relevance: re-rank for relevance minus redundancy."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def mmr(candidates: Sequence[tuple[int, float]], similarity: Callable[[int, int], float],
        lam: float, k: int) -> list[tuple[int, float]]:
    """Pick k ids greedily by lam * relevance - (1 - lam) * max similarity to those picked.

    Returns (id, mmr score) in pick order. lam = 1 keeps the relevance order.
    """
    remaining = list(candidates)
    picked: list[tuple[int, float]] = []
    while remaining and len(picked) < k:
        best_index, best_value = 0, float("-inf")
        for index, (doc_id, relevance) in enumerate(remaining):
            redundancy = max((similarity(doc_id, chosen) for chosen, _ in picked), default=0.0)
            value = lam * relevance - (1 - lam) * redundancy
            if value > best_value:
                best_index, best_value = index, value
        doc_id, _ = remaining.pop(best_index)
        picked.append((doc_id, best_value))
    return picked
