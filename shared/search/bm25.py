"""The BM25 channel: the query's segmented terms against the documents' full-text index."""

from __future__ import annotations

import math

from typing import Sequence

from shared.search.channel import DOCUMENT_ROUTE
from shared.search.query import Query
from shared.store.documents import DocumentFilter, DocumentStore


def squash(raw: float) -> float:
    """Map a raw BM25 score (higher is better) into (0, 1)."""
    return 1.0 / (1.0 + math.exp(-raw / 8.0))


class Bm25Channel:
    name, route, needs_vector = "bm25", DOCUMENT_ROUTE, False

    def __init__(self, store: DocumentStore, weight: float, context_weight: float = 1.0):
        self.store = store
        self.weight = weight
        self.context_weight = context_weight

    def search(self, query: Query, scope: DocumentFilter, depth: int) -> list[tuple[int, float]]:
        return [(doc_id, squash(raw)) for doc_id, raw in self.store.bm25(query.terms, scope, depth,
                                                                      self.context_weight)]

    def evidence(self, query: Query, scope: DocumentFilter, ids: Sequence[int]) -> dict[int, float]:
        """Every memory has its BM25 row from the commit that stored it: one without a query
        term scores squash(0)."""
        raw = self.store.bm25_of(query.terms, ids, scope, self.context_weight)
        return {i: squash(raw.get(i, 0.0)) for i in ids}
