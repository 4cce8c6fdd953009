"""The BM25 channel: the query's segmented terms against the documents' full-text index."""

from __future__ import annotations

import math
from collections.abc import Sequence

from shared.search.channel import DOCUMENT_ROUTE
from shared.search.query import Query
from shared.store.interface import Store
from shared.store.model.documents import DocumentFilter

STRENGTH_DEPTH = 5  # memories whose terms strength() reads


def holds(tokens: set[str], term: str) -> bool:
    """Whether a memory's terms hold a query term, as FTS5's porter stemmer would match it:
    the term itself, or for a longer word one sharing all but its last two letters
    ("peanut" in "peanuts", "allergy" in "allergic"; not "present" in "president")."""
    if term in tokens:
        return True
    stem = len(term) - 2
    return stem >= 4 and term.isascii() and any(
        t[:stem] == term[:stem] and abs(len(t) - len(term)) <= 3 for t in tokens)


def squash(raw: float) -> float:
    """Map a raw BM25 score (higher is better) into (0, 1)."""
    return 1.0 / (1.0 + math.exp(-raw / 8.0))


class Bm25Channel:
    name, route, needs_vector = "bm25", DOCUMENT_ROUTE, False

    def __init__(self, store: Store, weight: float, context_weight: float = 1.0):
        self.store = store
        self.weight = weight
        self.context_weight = context_weight

    def search(self, query: Query, scope: DocumentFilter, depth: int) -> list[tuple[int, float]]:
        return [(doc_id, squash(raw)) for doc_id, raw in self.store.documents.bm25(
            query.terms, scope, depth, self.context_weight)]

    def strength(self, query: Query, ranking: Sequence[tuple[int, float]]) -> float:
        """The largest share of the query's terms that one of the best few memories holds.
        Not the raw BM25 score: its IDF collapses in a small store (one memory, asked its
        own words, scores ~0), so it would not mean the same at every size."""
        terms = set(query.terms)
        if not terms or not ranking:
            return 0.0
        held = self.store.documents.terms_of([i for i, _ in ranking[:STRENGTH_DEPTH]]).values()
        return max((sum(holds(set(tokens), t) for t in terms) / len(terms) for tokens in held), default=0.0)

    def indexed(self, ids: Sequence[int]) -> set[int]:
        """Every memory has its BM25 row from the commit that stored it."""
        return set(ids)
