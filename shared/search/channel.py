"""The one interface every retrieval channel has, and the route each belongs to.

A channel turns a query into a ranking of memory ids, best first, with scores in [0, 1]:
`search(query, scope, depth) -> [(id, score), ...]`; `evidence(query, scope, ids)` gives its
score for memories other channels found, and leaves out those it has not indexed yet (a memory
just saved has no vector: that is no evidence, not evidence of irrelevance). It says which route it feeds, its weight
within that route's score fusion, and whether it needs the query vector (those run in the
embedding lane). Recall never looks at a channel's name or class to decide anything.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from shared.search.query import Query
from shared.store.documents import DocumentFilter

DOCUMENT_ROUTE, GRAPH_ROUTE = "document", "graph"

Ranking = Sequence[tuple[int, float]]


class Channel(Protocol):
    name: str
    route: str
    weight: float
    needs_vector: bool

    def search(self, query: Query, scope: DocumentFilter, depth: int) -> list[tuple[int, float]]:
        """Up to `depth` memories in scope, best first, scores in [0, 1]."""

    def evidence(self, query: Query, scope: DocumentFilter, ids: Sequence[int]) -> dict[int, float]:
        """{id: score} for those of `ids` this channel has indexed, on search's scale (a memory
        it indexed and does not match gets its no-match score)."""
