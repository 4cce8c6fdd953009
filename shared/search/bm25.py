"""The BM25 channel: segmented query terms OR-ed into a safe FTS5 MATCH expression.

No user text ever reaches MATCH as syntax: every term is a double-quoted FTS5 string (inner
quotes doubled), so quotes, '*', NEAR(...), AND/OR/NOT, '-', 'col:' filters and parentheses
are searched for as words or dropped, never obeyed.
"""

from __future__ import annotations

import math

from shared.store.documents import DocumentFilter, DocumentStore
from shared.text.segment import Segmenter

# A 10 kB query yields thousands of terms; FTS5 cost grows with each, and past a few dozen
# distinct terms the ranking no longer changes in practice.
MAX_QUERY_TERMS = 64


def quote_term(term: str) -> str:
    """One FTS5 string token: the term in double quotes, inner double quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def match_expression(terms: list[str]) -> str | None:
    """An OR of quoted terms, or None when there is nothing to search for."""
    if not terms:
        return None
    return " OR ".join(quote_term(t) for t in terms)


def squash(raw: float) -> float:
    """Map a raw BM25 score (higher is better) into (0, 1)."""
    return 1.0 / (1.0 + math.exp(-raw / 8.0))


class Bm25Channel:
    """Searches the documents FTS with a segmented query; returns (id, score in (0,1))."""

    def __init__(self, store: DocumentStore, segmenter: Segmenter):
        self.store = store
        self.segmenter = segmenter

    def search(self, query: str, scope: DocumentFilter, limit: int) -> list[tuple[int, float]]:
        match = match_expression(self.segmenter.unique_terms(query, MAX_QUERY_TERMS))
        if match is None:
            return []
        return [(doc_id, squash(raw)) for doc_id, raw in self.store.bm25(match, scope, limit)]
