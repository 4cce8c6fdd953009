"""What a recall answer looks like to a model reading it: one line a memory, and the best
results that fit a budget.

The structured result keeps every field; a host puts the text into its model's context, so
the text is what costs tokens. A line is the memory's id, its score and its own text (which
starts with its `[YYYY-MM-DD HH:MM]` time marker), then its persona summary when it has one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from shared.search.request import Hit

NOTHING_FOUND = "No memory is relevant enough to this query (min_score {min_score:g})."
NOTHING_FITS = "No memory relevant enough to this query (min_score {min_score:g}) fits in max_chars {max_chars}."
_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def line(hit: Hit) -> str:
    """`[id 12 · 0.82] [2023-05-08 13:56] text (persona: …) (also stored as 14, 19)`."""
    fields = hit.document.fields
    text = _BREAKS.sub(" / ", hit.document.text.strip())
    parts = [f"[id {hit.document.id} · {hit.score:.2f}] {text}"]
    if fields.persona_summary:
        parts.append(f"(persona: {_BREAKS.sub(' / ', fields.persona_summary.strip())})")
    if hit.duplicates:
        parts.append(f"(also stored as {', '.join(str(i) for i in hit.duplicates)})")
    return " ".join(parts)


def text_of(hits: Sequence[Hit], min_score: float, max_chars: int | None = None) -> str:
    """The text content of a recall: a line per hit, or a sentence saying nothing was found
    (with a budget: nothing relevant enough whose line fits in it)."""
    if hits:
        return "\n".join(line(h) for h in hits)
    if max_chars is None:
        return NOTHING_FOUND.format(min_score=min_score)
    return NOTHING_FITS.format(min_score=min_score, max_chars=max_chars)


def fit(hits: Sequence[Hit], max_chars: int | None) -> list[Hit]:
    """The best hits, in order, whose lines (and the newlines between them) fit in
    max_chars; a hit that does not fit is left out whole, and a later, shorter one may
    still fit. None: no budget."""
    if max_chars is None:
        return list(hits)
    kept: list[Hit] = []
    used = 0
    for hit in hits:
        cost = len(line(hit)) + (1 if kept else 0)
        if used + cost <= max_chars:
            kept.append(hit)
            used += cost
    return kept
