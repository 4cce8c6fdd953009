"""When what a memory tells happens, and recall's answer to a question about a window of time
(shared/search/timeframe.py).

A memory happens at its plans' deadlines (planned atoms, still active or already expired) when
it holds a dated plan; otherwise at the dates its text states for what it tells, read as past
against when it was said ("last weekend", 3月5日), and at its original time (when it was told).

With a window, the candidates that happen inside it rank above those that do not. An agenda
question ("what do I have next week?", 明天要做什么) lists them by date: soonest first for a
window that reaches past now, latest first for one behind; and, as such a question shares no
words with its answers, each scores at least WINDOW_SCORE. Any other question keeps its
relevance order within the window. A window the caller gives (happens_after / happens_before)
also leaves out what does not happen inside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import tzinfo

from shared.extract.time_calendar import period
from shared.extract.timeparse import date_mentions
from shared.search.timeframe import TimeQuestion, epoch_of
from shared.store.model.atoms import DATED_STATES
from shared.store.model.documents import Document, epoch, unmarked
from shared.store.model.record import Record
from shared.time_zone import on_clock

# A memory that happens inside the window an agenda question asks about is what it asks for,
# though it shares none of its words: its score (a probability of relevance) is at least this.
WINDOW_SCORE = 0.5
_PERIOD_DAYS = ("week", "weekend", "month", "year")


def plan_dates(validity: Iterable[Record]) -> dict[int, list[float]]:
    """{memory: its dated plans' deadlines} (rows: store.atoms.validity_rows)."""
    dates: dict[int, list[float]] = {}
    for row in validity:
        if row["type"] == "planned" and row["deadline"] is not None and row["state"] in DATED_STATES:
            dates.setdefault(row["memory_id"], []).append(row["deadline"])
    return dates


def spans_of(document: Document, plans: Sequence[float], zone: tzinfo) -> list[tuple[float, float]]:
    """When a memory happens, as [first, end) spans (a moment: a span of none); the dates its
    text states are read on the clock it was told on (zone: the user's)."""
    if plans:
        return [(t, t) for t in sorted(plans)]
    told = document.fields.original_time
    said = epoch(told) if told is not None else document.create_time
    spans = [(said, said)]
    if told is None:
        return spans
    for mention in date_mentions(unmarked(document.text), on_clock(told, zone), past=True):
        last = period(mention.day, mention.precision)[1] if mention.precision in _PERIOD_DAYS else mention.day
        spans.append((epoch_of(mention.day), epoch_of(last) + 86_400.0))
    return spans


def inside(asked: TimeQuestion, documents: Mapping[int, Document], validity: Iterable[Record],
           zone: tzinfo) -> dict[int, float]:
    """{memory: the first moment it happens inside the window} for the memories that do."""
    plans = plan_dates(validity)
    found: dict[int, float] = {}
    for doc_id, document in documents.items():
        moments = [first for first, end in spans_of(document, plans.get(doc_id, ()), zone)
                   if (asked.window.holds(first) if end == first else asked.window.covers(first, end))]
        if moments:
            found[doc_id] = min(moments)
    return found


def arranged(fused: list[tuple[int, float]], within: Mapping[int, float], asked: TimeQuestion,
             listed: Iterable[int] = ()) -> list[tuple[int, float]]:
    """The fused ranking (best first, the best 1.0) with what happens inside the window first,
    and each place keeping the score of that place (calibration reads place and score). `listed`:
    memories found for the window alone (no channel found them), placed by their date."""
    seen = {i for i, _ in fused}
    ranking = list(fused) + [(i, 0.0) for i in listed if i not in seen]
    first = [i for i, _ in ranking if i in within]
    if asked.agenda:
        first.sort(key=lambda i: within[i], reverse=not asked.ahead)
    rest = [] if asked.explicit else [i for i, _ in ranking if i not in within]
    scores = sorted((s for _, s in ranking), reverse=True)
    return list(zip(first + rest, scores))


def lifted(score: dict[int, float], within: Mapping[int, float], asked: TimeQuestion) -> dict[int, float]:
    """Scores with those inside the window of an agenda question at least WINDOW_SCORE."""
    if not asked.agenda:
        return score
    return {i: max(s, WINDOW_SCORE) if i in within else s for i, s in score.items()}
