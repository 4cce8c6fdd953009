"""Intent routing: shift weight between the document and graph routes from the query's surface."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from shared.config import RetrievalConfig

_ASCII = re.compile(r"^[\x00-\x7f]+$")


@dataclass(frozen=True)
class RouteWeights:
    document: float
    graph: float
    intents: tuple[str, ...]


def _spans(text: str, cue: str):
    """Where a cue occurs: as whole words in Latin text, as a substring in Chinese."""
    if _ASCII.match(cue):
        pattern = rf"(?<![a-z0-9]){re.escape(cue)}(?![a-z0-9])"
    else:
        pattern = re.escape(cue)
    return [m.span() for m in re.finditer(pattern, text)]


def find_intents(query: str, cues: dict[str, Sequence[str]]) -> set[str]:
    """Intents whose cues occur in the query. Longer cues claim their text first, so the
    "是什么" inside "是什么时候" (when) does not also count as a factual question."""
    text = query.lower()
    candidates = sorted(((cue.lower(), intent) for intent, words in cues.items() for cue in words),
                        key=lambda item: -len(item[0]))
    taken: list[tuple[int, int]] = []
    found: set[str] = set()
    for cue, intent in candidates:
        for start, end in _spans(text, cue):
            if all(end <= s or start >= e for s, e in taken):
                taken.append((start, end))
                found.add(intent)
    return found


def wanted_atom_types(query: str, config: RetrievalConfig) -> tuple[str, ...]:
    """The atom types a query asks about: preference for likes and dislikes, planned for
    plans (their cues in config); recall favours memories holding such atoms."""
    found = find_intents(query, {"preference": config.preference_cues, "planned": config.plan_cues})
    return tuple(kind for kind in ("preference", "planned") if kind in found)


def has_cue(query: str, cues: Sequence[str]) -> bool:
    return bool(find_intents(query, {"any": cues}))


def route_weights(query: str, config: RetrievalConfig) -> RouteWeights:
    """Route weights after intent boosts, scaled to sum to 1."""
    found = find_intents(query, {"relational": config.relational_cues,
                                 "temporal": config.temporal_cues,
                                 "factual": config.factual_cues})
    document, graph = config.document_route_weight, config.graph_route_weight
    if "relational" in found:
        graph += config.relational_graph_boost
    if "temporal" in found:
        graph += config.temporal_graph_boost
    if "factual" in found:
        document += config.factual_document_boost
    intents = [name for name in ("relational", "temporal", "factual") if name in found]
    total = document + graph
    if total <= 0:
        return RouteWeights(1.0, 0.0, tuple(intents))
    return RouteWeights(document / total, graph / total, tuple(intents))
