"""A conversation as turns: from a list of {speaker, text, time?} or from a transcript string.

A transcript is "Name: text" lines (a full-width colon too, for Chinese); a line without a name
continues the previous turn. A line before any name is a turn of an unnamed speaker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from shared.errors import InvalidInput

# "Name: text"; a name is short and holds no sentence punctuation or a URL scheme's "//".
_TURN = re.compile(r"^\s*([^:：\n.!?。！？/]{1,40}?)\s*[:：]\s*(.*)$")
UNNAMED = "someone"


@dataclass(frozen=True)
class Turn:
    speaker: str
    text: str
    time: datetime | None = None


def parse_conversation(conversation, default_time: datetime | None = None) -> list[Turn]:
    """Turns from a list of dicts or a transcript string; InvalidInput if none remain."""
    if isinstance(conversation, str):
        turns = _from_transcript(conversation, default_time)
    elif isinstance(conversation, (list, tuple)):
        turns = [_from_item(i, item, default_time) for i, item in enumerate(conversation)]
    else:
        raise InvalidInput("conversation must be a list of turns {speaker, text, time?} or one transcript string")
    turns = [t for t in turns if t.text.strip()]
    if not turns:
        raise InvalidInput("conversation is empty: give at least one turn with text")
    return turns


def _from_transcript(text: str, default_time: datetime | None) -> list[Turn]:
    turns: list[Turn] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        named = _TURN.match(line)
        if named and named.group(2).strip():
            turns.append(Turn(named.group(1).strip(), named.group(2).strip(), default_time))
        elif turns:
            last = turns[-1]
            turns[-1] = Turn(last.speaker, f"{last.text}\n{line.strip()}", last.time)
        else:
            turns.append(Turn(UNNAMED, line.strip(), default_time))
    return turns


def _from_item(index: int, item, default_time: datetime | None) -> Turn:
    if not isinstance(item, dict):
        raise InvalidInput(f"conversation[{index}] must be an object {{speaker, text, time?}}")
    speaker, text, moment = item.get("speaker"), item.get("text"), item.get("time")
    if not isinstance(text, str):
        raise InvalidInput(f"conversation[{index}].text must be a string")
    if speaker is not None and not isinstance(speaker, str):
        raise InvalidInput(f"conversation[{index}].speaker must be a string")
    when = default_time
    if moment is not None:
        try:
            when = datetime.fromisoformat(str(moment).strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(f"conversation[{index}].time must be ISO-8601, got {str(moment)[:40]!r}") from None
    return Turn((speaker or UNNAMED).strip() or UNNAMED, text.strip(), when)


def transcript(turns: list[Turn]) -> str:
    """The turns as "Name: text" lines (what a model reads, and what is hashed for ingest)."""
    return "\n".join(f"{t.speaker}: {t.text}" for t in turns)
