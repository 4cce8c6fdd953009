"""Documents as the layers above the store see them: the value types, the limits a memory is
held to, and the pure helpers over its text and times. No engine here."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from typing import Any, Literal, overload

# What a memory may hold, checked wherever one is made (memorize's MemoryMetadata, a
# summarizer's StructuredMemory). A key fact becomes an atom and a graph fact, so it is kept to
# a paragraph; topics and participants are names and labels.
MAX_LIST_ITEMS = 64

MAX_KEY_FACT_CHARS = 1000

MAX_LABEL_CHARS = 200

MAX_SUMMARY_CHARS = 4000

Sentiment = Literal["positive", "neutral", "negative"]  # as the documents table's CHECK

_TIME_MARKER = re.compile(r"^\s*\[\d{4}-\d{2}-\d{2}[^\]\n]{0,40}\]")


@dataclass(frozen=True)
class MemoryFields:
    """What a caller may set on a memory besides its content (already validated)."""

    topics: tuple[str, ...] = ()
    participants: tuple[str, ...] = ()
    key_facts: tuple[str, ...] = ()
    sentiment: str = "neutral"
    importance: float = 0.5
    pinned: bool = False
    session_id: str | None = None
    persona_id: str | None = None
    original_time: datetime | None = None
    persona_summary: str | None = None
    source_hash: str | None = None  # what the memory was made from (a transcript, an import row)


@dataclass(frozen=True)
class Document:
    id: int
    text: str
    content_hash: str
    fields: MemoryFields
    archived: bool
    access_count: int
    last_access_time: float | None
    create_time: float
    update_time: float


@dataclass(frozen=True)
class History:
    """What a memory brought from elsewhere (an import) keeps of its past instead of
    starting now: its times, archived flag and accesses."""

    create_time: float
    update_time: float
    archived: bool = False
    access_count: int = 0
    last_access_time: float | None = None


@dataclass(frozen=True)
class DocumentFilter:
    """Exact-match scoping for list and search; times are epoch seconds on original_time."""

    session_id: str | None = None
    persona_id: str | None = None
    include_archived: bool = False
    since: float | None = None
    until: float | None = None


def time_marker(moment: datetime) -> str:
    """The '[YYYY-MM-DD HH:MM]' marker put in front of a memory's text."""
    if (moment.hour, moment.minute, moment.second) == (0, 0, 0):
        return f"[{moment:%Y-%m-%d}]"
    return f"[{moment:%Y-%m-%d %H:%M}]"


def marked_text(content: str, original_time: datetime | None) -> str:
    """The stored text: content with its original-time marker, unless it already has one."""
    content = content.strip()
    if original_time is None or _TIME_MARKER.match(content):
        return content
    return f"{time_marker(original_time)} {content}"


def unmarked(text: str) -> str:
    """Text without its leading original-time marker (what gets embedded)."""
    return _TIME_MARKER.sub("", text, count=1).strip()


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@overload
def epoch(moment: datetime) -> float: ...


@overload
def epoch(moment: datetime | None) -> float | None: ...


def epoch(moment: datetime | None) -> float | None:
    """Seconds since the epoch; a naive time is taken as UTC."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def stored_text(content: str, original_time: datetime | None, create_time: float,
                zone: tzinfo = timezone.utc) -> str:
    """The text kept for a memory: its content behind the time marker of when it happened (on
    its own clock), or, without an original time, of when it was stored (on `zone`'s, the
    user's)."""
    moment = original_time or datetime.fromtimestamp(create_time, zone).replace(second=0, microsecond=0)
    return marked_text(content, moment)


def outdated(before: tuple[Any, ...] | None, text: str, fields: MemoryFields) -> tuple[bool, bool]:
    """(atoms outdated, graph output outdated) by an update from `before` (derived_for) to
    this text and these fields, so that nothing derived from a memory shows where it no
    longer is or says what it no longer says, worker or no worker, until its stages (which
    the caller resets) derive it again. Atoms are of a persona, a session and a text; they are
    hidden, not removed (atoms.CURRENT): removing them must first undo what they did to other
    atoms, which the atoms stage does. Graph output is of a persona (its nodes are that
    persona's graph) and a text, and does nothing to other memories' output: it goes."""
    if before is None:
        return False, False
    persona, session, version = before
    moved_or_rewritten = persona != fields.persona_id or version != content_hash(text)
    return moved_or_rewritten or session != fields.session_id, moved_or_rewritten


LIST_STATES = ("active", "pinned", "archived", "all")
