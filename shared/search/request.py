"""What a recall is asked (RecallRequest, and the floors a request takes from the settings
or its caller) and what it hands back (Hit)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timezone, tzinfo
from typing import Any, TypedDict

from shared.config import RetrievalConfig
from shared.store.model.documents import Document, DocumentFilter


@dataclass(frozen=True)
class RecallRequest:
    """One recall. min_score: leave out results scoring below it; min_best_score: answer
    nothing when the best result scores below it; min_answerable: answer nothing when the
    store is less likely than this to hold an answer at all (calibration.answerable);
    max_chars: the best results whose answer lines (shared/search/answer.py) fit."""

    query: str
    k: int
    scope: DocumentFilter
    explain: bool = False
    min_score: float = 0.0
    max_chars: int | None = None
    min_best_score: float = 0.0
    min_answerable: float = 0.0
    # when what is recalled happens (epoch seconds, [after, before), None: open); both None: the
    # window the query's own time words name, if any
    happens_after: float | None = None
    happens_before: float | None = None
    zone: tzinfo = timezone.utc  # the user's clock, on which the query's time words are read


class Floors(TypedDict):
    min_score: float
    min_best_score: float
    min_answerable: float


def floors(config: RetrievalConfig, min_score: float | None) -> Floors:
    """A request's floors: without a min_score of the caller's, the configured three; a
    caller's min_score rules alone (it asked for exactly that floor): results below it are
    left out and nothing else is."""
    if min_score is None:
        return {"min_score": config.min_score, "min_best_score": config.min_best_score,
                "min_answerable": config.min_answerable}
    return {"min_score": min_score, "min_best_score": min_score, "min_answerable": 0.0}


@dataclass(frozen=True)
class Hit:
    """A recalled memory. score: the estimated probability that it is relevant to the query
    (calibrated on held-out benchmark folds); duplicates: ids of memories with the same text,
    folded into this one."""

    document: Document
    score: float
    explain: dict[str, Any] | None = None
    duplicates: tuple[int, ...] = ()

