"""What every import reader yields: a Row to memorize, or a BadRow to report and skip."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from shared.errors import InvalidInput
from shared.memory_rules import LATEST_YEAR, check_time_range
from shared.store.model.documents import History


@dataclass(frozen=True)
class Row:
    """One memory to import, as memorize would take it.

    metadata holds memorize's metadata keys as JSON values (checked by memorize's own model
    when the row is written). source says what makes two rows the same memory: hashed with the
    persona into source_hash, so importing a file again adds nothing. A row from our own export
    may carry the source_hash its memory already had (a transcript's), its id in the store it
    came from, and its history (times, archived flag, accesses)."""

    where: str
    content: str
    metadata: dict = field(default_factory=dict)
    source: str = ""
    source_hash: str | None = None
    origin_id: int | None = None
    history: History | None = None


@dataclass(frozen=True)
class BadRow:
    """A row that cannot be imported: where it is and what is wrong with it."""

    where: str
    problem: str


def source_hash(persona_id: str | None, source: str) -> str:
    """The source_hash of an imported row: the same row for the same persona is one memory,
    the same row imported for another persona another."""
    return hashlib.sha256(f"import\n{persona_id or ''}\n{source}".encode()).hexdigest()


# Epoch seconds a stored time may take: from 1970 (times are >= 0) to the end of the latest
# year a memory's time may fall in (memory_rules.LATEST_YEAR).
LATEST_SECONDS = datetime(LATEST_YEAR, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()


def parse_json(raw: str):
    """json.loads of one line, every failure a ValueError with a short reason: not JSON,
    nested too deeply, or bytes that were no UTF-8 (kept as lone surrogates by the reader)."""
    bad = undecodable(raw)
    if bad:
        raise ValueError(bad)
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ValueError("nested too deeply: lists or objects inside one another past what "
                         "a row can hold") from None


def undecodable(raw: str) -> str | None:
    """The problem of a line holding bytes that are no UTF-8 (decoded with surrogateescape,
    each such byte is a character U+DC80..U+DCFF), with the first one's byte offset."""
    found = _ESCAPED.search(raw)  # not a loop over every character: a line may be megabytes
    if found is None:
        return None
    index, char = found.start(), found.group()
    offset = len(raw[:index].encode("utf-8", "surrogateescape"))
    return (f"not valid UTF-8: byte 0x{ord(char) - 0xDC00:02x} at byte {offset + 1} of "
            "the line; save the file as UTF-8")


_ESCAPED = re.compile("[\udc80-\udcff]")


def check_original_time(value) -> None:
    """ValueError unless an ISO-8601 original_time falls in the years a stored time may take
    once its offset is applied (memory_rules.check_time_range: a year-9999 time with a -23:59
    offset is year 10000 in UTC)."""
    if not isinstance(value, str):
        return  # memorize's own rules say what an original_time must be
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return
    try:
        check_time_range(when, "original_time")
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
