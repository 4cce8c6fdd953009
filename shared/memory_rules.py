"""What a memory may hold: the one rule for every entry point's input, applied by the memory
service (shared/memories.py) to whatever it is given — by the MCP tools, the panel,
`aokun import`, `aokun ingest` and the summarizer alike. A broken rule is InvalidInput, one
line naming the field ("topics[2]: must be at most 200 characters (got 240)").

Content is measured as the service stores it: without the whitespace around it and without
a leading time marker ("[2024-05-08 13:56] "). The marker says when the memory happened — a
field, which the service writes in front of every memory itself. Counting it would charge a
caller who writes the marker 18 characters nobody else pays, and refuse an exported memory
written at the limit when it is imported back (an export holds the stored text, marker
included). Characters are Python str characters (code points), as in the config's
server.max_content_chars.

The MCP boundary's pydantic models (shared/api/models.py) describe these limits in the
tools' schemas, from the same constants; the service checks again, so nothing reaches the
store that this module would refuse.
"""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import datetime, timezone
from typing import Any, get_args

from shared.config import MAX_ID_CHARS
from shared.errors import InvalidInput
from shared.store.model.documents import (
    MAX_KEY_FACT_CHARS,
    MAX_LABEL_CHARS,
    MAX_LIST_ITEMS,
    MAX_SUMMARY_CHARS,
    MemoryFields,
    Sentiment,
    unmarked,
)

# The years a memory's time may fall in (UTC): wide enough for any real memory or plan, and far
# from the calendar's ends, where the date arithmetic of the stages ("tomorrow") cannot go.
EARLIEST_YEAR, LATEST_YEAR = 1900, 2200
# What a host sends when it serialises a missing value as a string: a bug, never a name.
NULL_WORDS = frozenset({"null", "none", "undefined"})
MAX_SOURCE_HASH_CHARS = 200
SENTIMENTS: tuple[str, ...] = get_args(Sentiment)
LIST_LIMITS = {"topics": MAX_LABEL_CHARS, "participants": MAX_LABEL_CHARS,
               "key_facts": MAX_KEY_FACT_CHARS}
# What an edit may change (source_hash is what a memory was made from, never edited).
EDITABLE = frozenset(f.name for f in dataclasses.fields(MemoryFields)) - {"source_hash"}
# memorize's metadata keys, as JSON values (an import row, a summarized conversation).
METADATA_KEYS = tuple(f.name for f in dataclasses.fields(MemoryFields) if f.name != "source_hash")
_SHOWN_CHARS = 60


def lone_surrogate_problem(value: str) -> str | None:
    """What is wrong with text that cannot be stored as UTF-8 (a lone surrogate), or None."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds an invalid character at position {exc.start} (a lone UTF-16 surrogate)"
    return None


def storable_text(name: str, value: Any) -> str:
    """A string that UTF-8 can store; InvalidInput naming `name` otherwise."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string (got {shown(value)})")
    problem = lone_surrogate_problem(value)
    if problem:
        raise InvalidInput(f"{name} {problem}")
    return value


def content_length(content: str) -> int:
    """The length the limit applies to: no surrounding whitespace, no leading time marker."""
    return len(unmarked(content))


def check_content(content: Any, limit: int) -> str:
    """A memory's text: storable, not blank, at most `limit` characters (server.max_content_chars)."""
    storable_text("content", content)
    if not content.strip():
        raise InvalidInput("content is empty: give the text to remember")
    length = content_length(content)
    if length > limit:
        raise InvalidInput(f"content is {length} characters; the limit is {limit} "
                           "(server.max_content_chars)")
    return content


def check_fields(fields: MemoryFields) -> MemoryFields:
    """Every field of a memory within its limits; list items come back stripped."""
    if not isinstance(fields, MemoryFields):
        raise InvalidInput(f"metadata must be MemoryFields (got {type(fields).__name__})")
    return dataclasses.replace(fields, **{f.name: check_field(f.name, getattr(fields, f.name))
                                          for f in dataclasses.fields(MemoryFields)})


def check_field(name: str, value: Any) -> Any:
    """One field's value as MemoryFields holds it (lists as tuples, original_time a datetime)."""
    if name in LIST_LIMITS:
        return _items(name, value, LIST_LIMITS[name])
    if name == "sentiment":
        if value not in SENTIMENTS:
            raise InvalidInput(f"sentiment: must be one of {', '.join(SENTIMENTS)} (got {shown(value)})")
        return value
    if name == "importance":
        return _importance(value)
    if name == "pinned":
        if not isinstance(value, bool):
            raise InvalidInput(f"pinned: must be true or false (got {shown(value)})")
        return value
    if name in ("session_id", "persona_id"):
        return check_scope_id(name, _optional_text(name, value, MAX_ID_CHARS, blank_ok=False))
    if name == "persona_summary":
        return _optional_text(name, value, MAX_SUMMARY_CHARS, blank_ok=True)
    if name == "source_hash":
        return _optional_text(name, value, MAX_SOURCE_HASH_CHARS, blank_ok=False)
    if name == "original_time":
        if value is not None and not isinstance(value, datetime):
            raise InvalidInput(f"original_time: must be a date-time (got {shown(value)})")
        if value is not None:
            check_time_range(value, "original_time")
        return value
    raise InvalidInput(f"unknown field {name[:40]!r} (accepted: {', '.join(METADATA_KEYS)})")


def check_changes(changes: Any) -> dict:
    """An edit's changed fields, each checked; unknown or uneditable names are refused."""
    if not isinstance(changes, dict):
        raise InvalidInput(f"metadata changes must be a mapping (got {type(changes).__name__})")
    for name in changes:
        if name not in EDITABLE:
            raise InvalidInput(f"unknown field {str(name)[:40]!r} (accepted: {', '.join(METADATA_KEYS)})")
    return {name: check_field(name, value) for name, value in changes.items()}


def fields_from_metadata(metadata: Any) -> MemoryFields:
    """memorize's metadata as JSON values (an import row: lists of strings, original_time an
    ISO-8601 string) as checked MemoryFields."""
    if not isinstance(metadata, dict):
        raise InvalidInput(f"metadata must be an object (got {shown(metadata)})")
    values = {}
    for key, value in metadata.items():
        if key not in METADATA_KEYS:
            raise InvalidInput(f"metadata: unknown key {str(key)[:40]!r} (accepted: {', '.join(METADATA_KEYS)})")
        if key == "original_time" and value is not None:
            storable_text("original_time", value)
            value = parse_time(value, "original_time")
        elif key in LIST_LIMITS and isinstance(value, list):
            value = tuple(value)
        values[key] = check_field(key, value)
    return MemoryFields(**values)


def parse_time(value: str, name: str) -> datetime:
    """An ISO-8601 date or date-time (a trailing Z is UTC); InvalidInput naming the argument."""
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{name}: must be an ISO-8601 date or date-time such as "
                           f"2024-05-08T13:56:00, got {value[:40]!r}") from None


def check_time_range(when: datetime, name: str) -> datetime:
    """A time in the years EARLIEST_YEAR..LATEST_YEAR once its offset is applied (UTC): a
    memory's time, or a conversation turn's. Outside them it is a typo or a placeholder
    (9999-12-31), and the stages' date arithmetic ("the day after") could not follow it."""
    try:
        utc = when.astimezone(timezone.utc) if when.tzinfo else when
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST_YEAR <= utc.year <= LATEST_YEAR:
        raise InvalidInput(f"{name}: {when.isoformat()[:40]} is out of range: give a time in the "
                           f"years {EARLIEST_YEAR} to {LATEST_YEAR} (UTC)")
    return when


def check_scope_id(name: str, value: str | None) -> str | None:
    """A persona_id or session_id, written or read by: never the word for a missing value
    ("null", "None"), which a host sends when it turns a missing value into a string. Stored,
    it would be a persona nobody means; the admin reading by it would see another set of
    memories than asked for. Leave the key out instead."""
    if value is not None and value.strip().lower() in NULL_WORDS:
        raise InvalidInput(f"{name}: {shown(value)} is the word for no value, not a name: "
                           "leave the key out (or send JSON null) for none")
    return value


def check_memory_id(memory_id: Any) -> int:
    """A memory id is a positive integer (bool is no id)."""
    if not isinstance(memory_id, int) or isinstance(memory_id, bool):
        raise InvalidInput(f"id: must be an integer (got {shown(memory_id)})")
    if memory_id < 1:
        raise InvalidInput(f"id: must be at least 1 (got {memory_id})")
    return memory_id


def shown(value: Any) -> str:
    """A short JSON rendering of what the caller gave (a long string or list cut before it is
    rendered: a value of megabytes is never copied whole into a message)."""
    if isinstance(value, str) and len(value) > _SHOWN_CHARS:
        value = value[:_SHOWN_CHARS]
    elif isinstance(value, (list, tuple)) and len(value) > _SHOWN_CHARS:
        value = list(value[:_SHOWN_CHARS])
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:
        text = repr(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 1] + "…"


def _items(name: str, value: Any, limit: int) -> tuple[str, ...]:
    if not isinstance(value, (tuple, list)):
        raise InvalidInput(f"{name}: must be a list of strings (got {shown(value)})")
    if len(value) > MAX_LIST_ITEMS:
        raise InvalidInput(f"{name}: must have at most {MAX_LIST_ITEMS} items (got {len(value)})")
    items = []
    for index, item in enumerate(value):
        where = f"{name}[{index}]"
        storable_text(where, item)
        if len(item) > limit:
            raise InvalidInput(f"{where}: must be at most {limit} characters (got {len(item)})")
        if not item.strip():
            raise InvalidInput(f"{where}: is an empty string: give text or leave the item out")
        items.append(item.strip())
    return tuple(items)


def _importance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"importance: must be a number (got {shown(value)})")
    if not math.isfinite(value):
        raise InvalidInput(f"importance: must be a finite number (got {shown(value)})")
    if value < 0:
        raise InvalidInput(f"importance: must be at least 0 (got {shown(value)})")
    if value > 1:
        raise InvalidInput(f"importance: must be at most 1 (got {shown(value)})")
    return float(value)


def _optional_text(name: str, value: Any, limit: int, *, blank_ok: bool) -> str | None:
    if value is None:
        return None
    storable_text(name, value)
    if not value and not blank_ok:
        raise InvalidInput(f"{name}: must not be empty (leave it out instead)")
    if len(value) > limit:
        raise InvalidInput(f"{name}: must be at most {limit} characters (got {len(value)})")
    return value
