"""How much two bags of words share: used by search (MMR's redundancy) and by the atom rules
(a restated fact reinforces the atom it repeats), so it sits below both."""

from __future__ import annotations

from collections.abc import Collection


def jaccard(a: Collection[str], b: Collection[str]) -> float:
    """|a ∩ b| / |a ∪ b| of two bags of words taken as sets (0.0 when both are empty)."""
    a, b = set(a), set(b)
    union = len(a | b)
    return len(a & b) / union if union else 0.0
