"""Recall over the several personas a caller may read (shared/access.py: read_personas): one
recall per persona, merged best first.

Every channel is scoped by one persona, so a persona not given is never searched. Scores are
probabilities of relevance, comparable across personas, so the best k of all the runs are the
answer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from shared.search import answer
from shared.search.request import Hit, RecallRequest


class Scored(Protocol):
    @property
    def score(self) -> float: ...


ScoredT = TypeVar("ScoredT", bound=Scored)


def recall_over_personas(recall: Callable[[RecallRequest], list[Hit]], request: RecallRequest,
                         personas: Sequence[str | None]) -> list[Hit]:
    """The recall in each persona (None: no persona filter), merged best first and fitted to
    the request's max_chars."""
    runs = [recall(replace(request, scope=replace(request.scope, persona_id=persona)))
            for persona in personas]
    if len(runs) == 1:
        return runs[0]
    return answer.fit(merged(runs, request.k), request.max_chars)


def merged(runs: Sequence[Sequence[ScoredT]], k: int) -> list[ScoredT]:
    """The best k of several best-first lists of hits (each with a score), best first."""
    return sorted((hit for run in runs for hit in run), key=lambda hit: -hit.score)[:k]
