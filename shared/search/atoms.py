"""Atom search: BM25 over the atoms' full-text index, times each atom's time factor."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from shared.rules.atoms import time_factor
from shared.search.bm25 import squash
from shared.store import atoms
from shared.store.db import Database
from shared.store.match import MAX_QUERY_TERMS
from shared.text.segment import Segmenter


@dataclass(frozen=True)
class AtomHit:
    row: dict
    score: float
    time_factor: float


class AtomSearch:
    def __init__(self, db: Database, segmenter: Segmenter, clock: Callable[[], float] = time.time):
        self.db, self.segmenter, self.clock = db, segmenter, clock

    def search(self, query: str, k: int, types: Sequence[str] | None = None,
               persona_id: str | None = None, session_id: str | None = None) -> list[AtomHit]:
        """Active atoms best first: squashed BM25 x time factor (an expired plan scores 0)."""
        terms = self.segmenter.unique_terms(query, MAX_QUERY_TERMS)
        if not terms:
            return []
        now = self.clock()
        rows = atoms.search(self.db.connection(), terms, persona_id, session_id, types, max(4 * k, 20))
        hits = []
        for row in rows:
            factor = time_factor(row, now)
            hits.append(AtomHit(dict(row), squash(row["raw"]) * factor, factor))
        hits.sort(key=lambda h: -h.score)
        return [h for h in hits if h.score > 0][:k]
