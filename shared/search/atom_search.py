"""Atom search: BM25 over the atoms' full-text index, times each atom's time factor; and,
for typed requests, the still-valid atoms of those types listed without a query. Also which
memories hold still-valid atoms of given types (recall favours them for a question of that type)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from shared.atom_life import time_factor
from shared.search.bm25 import squash
from shared.store.interface import Store
from shared.store.model.fulltext import MAX_QUERY_TERMS
from shared.store.model.record import Record
from shared.text.segment import Segmenter


@dataclass(frozen=True)
class AtomHit:
    row: dict[str, Any]
    score: float  # relevance x time factor; 0 for an atom listed by type, not found by the query
    time_factor: float


def holding_types(rows: Sequence[Record], types: Sequence[str], now: float) -> set[int]:
    """Memories with an active atom of one of the types still valid at `now` (rows:
    store.atoms.validity_rows of the candidates; time factor above 0: a plan past its deadline
    no longer answers "what are my plans")."""
    return {row["memory_id"] for row in rows
            if row["state"] == "active" and row["type"] in types and time_factor(row, now) > 0}


class AtomSearch:
    def __init__(self, store: Store, segmenter: Segmenter, clock: Callable[[], float] = time.time):
        self.store, self.segmenter, self.clock = store, segmenter, clock

    def search(self, query: str | None, k: int, types: Sequence[str] | None = None,
               persona_id: str | None = None, session_id: str | None = None) -> list[AtomHit]:
        """Active atoms best first: squashed BM25 x time factor (an expired plan scores 0).

        With types, places the query leaves empty go to the other still-valid atoms of those
        types (all of them without a query): a caller asking for plans wants its plans even
        when none of them says "plans". Those come soonest deadline first, then newest."""
        now = self.clock()
        terms = self.segmenter.unique_terms(query, MAX_QUERY_TERMS) if query else []
        hits = self._matching(terms, k, types, persona_id, session_id, now) if terms else []
        if types and len(hits) < k:
            seen = [h.row["id"] for h in hits]
            rows = self.store.atoms.still_valid_of_types(types, persona_id, session_id, now, k - len(hits),
                                                         exclude=seen)
            hits += [AtomHit(dict(row), 0.0, time_factor(row, now)) for row in rows]
        return hits

    def _matching(self, terms: list[str], k: int, types: Sequence[str] | None, persona_id: str | None,
                  session_id: str | None, now: float) -> list[AtomHit]:
        rows = self.store.atoms.search(terms, persona_id, session_id, types, max(4 * k, 20))
        hits: list[AtomHit] = []
        for row in rows:
            factor = time_factor(row, now)
            hits.append(AtomHit(dict(row), squash(row["raw"]) * factor, factor))
        hits.sort(key=lambda h: -h.score)
        return [h for h in hits if h.score > 0][:k]
