"""The memory graph as the layers above the store see it: node, edge and entry types, and what
one memory contributes to the graph."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# What a named entity is; the self ("the user", one node per persona) is a person.
ENTITY_TYPES = ("person", "place", "organisation", "other")

NODE_TYPES = ENTITY_TYPES + ("topic", "fact")

# Edges rules draw between a memory's nodes; "relation" edges carry a typed relation between two
# entities (their vocabulary, inverses included, is shared/resources/relations.yaml).
EDGE_TYPES = ("describes", "mentioned_in", "co_occurs_with", "relation")

SELF_CANONICAL = "the user"


@dataclass(frozen=True)
class NodeSpec:
    type: str          # one of NODE_TYPES
    value: str         # as written
    canonical: str     # resolved form (case, width, aliases); nodes are keyed on it

    @property
    def key(self) -> str:
        return f"{self.type}:{self.canonical}"


@dataclass(frozen=True)
class EdgeSpec:
    src: NodeSpec
    dst: NodeSpec
    type: str          # one of EDGE_TYPES
    confidence: float
    weight: float = 1.0
    relation: str | None = None  # for "relation" edges: dst is src's <relation> ("wife")


@dataclass(frozen=True)
class EntrySpec:
    text: str          # searchable, e.g. "Fact: ... Summary: ..."
    tokens: str        # segmented terms of text, for FTS
    node: NodeSpec | None
    confidence: float
    atom_id: int | None = None


@dataclass(frozen=True)
class MemoryGraph:
    """Everything the graph holds for one memory."""

    nodes: Sequence[NodeSpec]
    edges: Sequence[EdgeSpec]
    entries: Sequence[EntrySpec]


def nodes_of(graph: MemoryGraph) -> list[NodeSpec]:
    """Every node the graph names, one per key, in first-seen order."""
    found: dict[str, NodeSpec] = {}
    for node in [*graph.nodes, *(e.src for e in graph.edges), *(e.dst for e in graph.edges),
                 *(e.node for e in graph.entries if e.node)]:
        found.setdefault(node.key, node)
    return list(found.values())
