"""Query focusing: what part of a query carries the information need; and what a stored
conversation turn is (who said it, whether it asks), for recall to weigh it.

A query may be a conversation transcript ("Name: text" lines) rather than a question. The
assistant's lines in it are generic and pull in generic memories; what the person said is
what memories should answer. So for a transcript, keep the lines of whoever spoke last (the
one now waiting for an answer), names kept. Anything else is used unchanged. It lifts recall
on dialogue queries (MADial's; figures in docs/performance.md); LoCoMo's questions are single
lines and unaffected.
"""

from __future__ import annotations

import re

from shared.store.model.documents import unmarked

# "Name: text" or "Name：text"; a name is short and has no sentence punctuation.
_TURN = re.compile(r"^\s*([^:：\n.!?。！？]{1,40}?)\s*[:：]\s*(\S.*)$")


def focus(query: str) -> str:
    """The lines of the last speaker if query is a transcript of two or more turns, else query."""
    lines = [line for line in query.splitlines() if line.strip()]
    if len(lines) < 2:
        return query
    turns = [turn for line in lines if (turn := _TURN.match(line))]
    if len(turns) < len(lines):
        return query
    last_speaker = turns[-1].group(1).strip().lower()
    return "\n".join(line.strip() for line, turn in zip(lines, turns)
                     if turn.group(1).strip().lower() == last_speaker)


def speaker(text: str) -> str | None:
    """Who said a memory stored as one "Name: text" turn (after its time marker), else None."""
    text = unmarked(text)
    turn = _TURN.match(text) if "\n" not in text.strip() else None
    return turn.group(1).strip() if turn else None


def asks(text: str) -> bool:
    """Whether a memory ends in a question: it asks for a fact rather than states one (the
    turn that answers it states it)."""
    return text.rstrip().endswith(("?", "？"))
