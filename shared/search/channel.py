"""The one interface every retrieval channel has, and the route each belongs to.

A channel turns a query into a ranking of memory ids, best first, with scores in [0, 1]:
`search(query, scope, depth) -> [(id, score), ...]`; `strength(query, ranking)` says how strong
its best evidence is in absolute terms (shared/search/calibration.py); `indexed(ids)` says which
memories it has taken in (a memory just saved has no vector yet: the vector channel's silence about it is no
evidence, not evidence of irrelevance). It says which route it feeds, its weight
within that route's score fusion, and whether it needs the query vector (those run in the
embedding lane). Recall never looks at a channel's name or class to decide anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from shared.search.query import Query
from shared.store.model.documents import DocumentFilter

DOCUMENT_ROUTE, GRAPH_ROUTE = "document", "graph"

# Query.derived's name for what channels note about a memory they found, for explain:
# {channel name: {memory id: {detail: value}}}.
NOTES = "channel_notes"
Notes = dict[str, dict[int, dict[str, Any]]]


def note(query: Query, channel: str, memory_id: int, **detail: Any) -> None:
    """Record, for explain, a detail of how `channel` found a memory in this recall."""
    query.derived(NOTES, Notes).setdefault(channel, {})[memory_id] = detail

Ranking = Sequence[tuple[int, float]]


class Channel(Protocol):
    name: str
    route: str
    weight: float
    needs_vector: bool

    def search(self, query: Query, scope: DocumentFilter, depth: int) -> list[tuple[int, float]]:
        """Up to `depth` memories in scope, best first, scores in [0, 1]."""
        ...

    def indexed(self, ids: Sequence[int]) -> set[int]:
        """Those of `ids` this channel has taken in (so could have found)."""
        ...

    def strength(self, query: Query, ranking: Ranking) -> float | None:
        """How strong the query's best evidence in this channel is, on a scale that does not
        depend on the other candidates or on the store's size (score calibration's input);
        None when the channel can say nothing (its evidence is then left out)."""
        ...
