"""Intent routing: shift weight between the document and graph routes from the query's surface."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from shared.config import RetrievalConfig

_ASCII = re.compile(r"^[\x00-\x7f]+$")


@dataclass(frozen=True)
class RouteWeights:
    document: float
    graph: float
    intents: tuple[str, ...]


def has_cue(query: str, cues: Sequence[str]) -> bool:
    """A cue matches as whole words in Latin text, as a substring in Chinese."""
    lowered = query.lower()
    for cue in cues:
        cue = cue.lower()
        if _ASCII.match(cue):
            if re.search(rf"(?<![a-z0-9]){re.escape(cue)}(?![a-z0-9])", lowered):
                return True
        elif cue in lowered:
            return True
    return False


def route_weights(query: str, config: RetrievalConfig) -> RouteWeights:
    """Route weights after intent boosts, scaled to sum to 1."""
    document, graph, intents = config.document_route_weight, config.graph_route_weight, []
    if has_cue(query, config.relational_cues):
        graph += config.relational_graph_boost
        intents.append("relational")
    if has_cue(query, config.temporal_cues):
        graph += config.temporal_graph_boost
        intents.append("temporal")
    if has_cue(query, config.factual_cues):
        document += config.factual_document_boost
        intents.append("factual")
    total = document + graph
    if total <= 0:
        return RouteWeights(1.0, 0.0, tuple(intents))
    return RouteWeights(document / total, graph / total, tuple(intents))
