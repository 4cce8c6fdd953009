"""Our own JSONL: a header line, then one memory a line, everything the store keeps of it.

    {"format": "aokun-export", "version": 1, "exported_at": "...", "persona": null, "memories": 2, "atoms": false}
    {"id": 7, "text": "[2024-05-08] ...", "topics": [...], ..., "create_time": 1715170000.5, ...}

The text is the stored text, time marker included, so a memory imported elsewhere has the very
same text. Times of the store (create_time, update_time, last_access_time) are epoch seconds
as the store holds them, so they come back exactly; original_time is ISO-8601 as memorize takes
it. Atoms (with --atoms) are derived data, written for reading: an import leaves them out and
the worker derives them again. Pure: no file or database access here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone

from shared.errors import InvalidInput
from shared.memory_rules import LATEST_YEAR
from shared.store.model.documents import Document, History
from shared.transfer.rows import LATEST_SECONDS, BadRow, Row, check_original_time, parse_json

FORMAT = "aokun-export"
VERSION = 1
METADATA_KEYS = ("topics", "participants", "key_facts", "sentiment", "importance", "pinned",
                 "session_id", "persona_id", "original_time", "persona_summary")
HISTORY_KEYS = ("create_time", "update_time", "archived", "access_count", "last_access_time")
ROW_KEYS = ("id", "text", *METADATA_KEYS, "source_hash", *HISTORY_KEYS, "atoms")
ATOM_COLUMNS = ("id", "type", "text", "state", "confidence", "subject", "attribute", "value",
                "deadline", "ttl_days", "reinforcement_count", "superseded_by", "create_time",
                "state_time")


# -- writing --------------------------------------------------------------------------------


def header(persona_id: str | None, count: int, with_atoms: bool, now: float) -> dict:
    exported = datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds")
    return {"format": FORMAT, "version": VERSION, "exported_at": exported, "persona": persona_id,
            "memories": count, "atoms": with_atoms}


def memory_record(doc: Document, atoms: list[dict] | None = None) -> dict:
    """Everything the store keeps of a memory but what is derived from it (BM25 terms,
    vectors, graph), in the order ROW_KEYS gives."""
    fields = doc.fields
    record = {
        "id": doc.id, "text": doc.text, "topics": list(fields.topics),
        "participants": list(fields.participants), "key_facts": list(fields.key_facts),
        "sentiment": fields.sentiment, "importance": fields.importance, "pinned": fields.pinned,
        "session_id": fields.session_id, "persona_id": fields.persona_id,
        "original_time": fields.original_time.isoformat() if fields.original_time else None,
        "persona_summary": fields.persona_summary, "source_hash": fields.source_hash,
        "create_time": doc.create_time, "update_time": doc.update_time, "archived": doc.archived,
        "access_count": doc.access_count, "last_access_time": doc.last_access_time,
    }
    if atoms is not None:
        record["atoms"] = atoms
    return record


def atom_record(row) -> dict:
    """One stored atom (a row of memory_atoms) as exported."""
    return {name: row[name] for name in ATOM_COLUMNS}


# Characters that some line readers (str.splitlines, editors) take for a line break, which
# json.dumps leaves raw: escaped, so that a record is one line for every reader.
_LINE_BREAKS = {0x2028: "\\u2028", 0x2029: "\\u2029", 0x85: "\\u0085"}


def line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False).translate(_LINE_BREAKS) + "\n"


# -- reading --------------------------------------------------------------------------------


def read_rows(lines: Iterable[str], name: str) -> Iterator[Row | BadRow]:
    """The rows of an export; a header line is checked and skipped. InvalidInput when the
    file is another format or from a newer Aokun."""
    first = True
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if first:
            first = False
            if _is_header(raw, name):
                continue
        yield _row(raw, f"{name} line {number}")


def _is_header(raw: str, name: str) -> bool:
    try:
        item = parse_json(raw)
    except ValueError:
        return False
    if not isinstance(item, dict) or "format" not in item:
        return False
    if item["format"] != FORMAT:
        raise InvalidInput(f"{name} is a {str(item['format'])[:40]!r} file, not an Aokun export: "
                           "give --format to say what it holds")
    version = item.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
        raise InvalidInput(f"{name} is export format version {version!r:.40}; this Aokun reads up to "
                           f"{VERSION}: upgrade Aokun to import it")
    return True


def _row(raw: str, where: str) -> Row | BadRow:
    try:
        item = parse_json(raw)
    except ValueError as exc:
        return BadRow(where, str(exc))
    if not isinstance(item, dict):
        return BadRow(where, 'not a JSON object: a row is {"text": ..., ...}')
    unknown = [key for key in item if key not in ROW_KEYS]
    if unknown:
        return BadRow(where, f"unknown key {unknown[0][:40]!r}; a row holds {', '.join(ROW_KEYS)}")
    text = item.get("text")
    if not isinstance(text, str):
        return BadRow(where, "text must be a string: the memory's text")
    try:
        history = _history(item)
        origin_id = _origin_id(item.get("id"))
        given_hash = _source_hash(item.get("source_hash"))
        check_original_time(item.get("original_time"))
    except ValueError as exc:
        return BadRow(where, str(exc))
    created = "" if history is None else repr(history.create_time)
    return Row(where=where, content=text, metadata={k: item[k] for k in METADATA_KEYS if k in item},
               source=f"aokun\n{created}\n{text}", source_hash=given_hash, origin_id=origin_id,
               history=history)


def _history(item: dict) -> History | None:
    """The row's times, archived flag and accesses; None when it gives none of them (the
    memory is then created now, like a new one)."""
    if not any(key in item for key in HISTORY_KEYS):
        return None
    if item.get("create_time") is None:
        given = next(key for key in HISTORY_KEYS if key in item)
        raise ValueError(f"{given} needs create_time (epoch seconds) in the same row")
    created = _seconds("create_time", item["create_time"])
    archived = item.get("archived", False)
    if not isinstance(archived, bool):
        raise ValueError(f"archived must be true or false (got {archived!r:.40})")
    last = item.get("last_access_time")
    return History(
        create_time=created,
        update_time=_seconds("update_time", item.get("update_time", created)),
        archived=archived,
        # A count may come as 3.0 from another tool's JSON; it is stored as given.
        access_count=_count("access_count", item.get("access_count", 0)),  # pyright: ignore[reportArgumentType]
        last_access_time=None if last is None else _seconds("last_access_time", last))


def _seconds(name: str, value) -> float:
    if not _non_negative(value):
        raise ValueError(f"{name} must be epoch seconds, a number >= 0 (got {value!r:.40})")
    if value > LATEST_SECONDS:
        raise ValueError(f"{name} {value!r:.40} is out of range: epoch seconds up to "
                         f"{LATEST_SECONDS:.0f} (the end of year {LATEST_YEAR})")
    return value


def _count(name: str, value) -> float:
    if not _non_negative(value) or value > 2**53:
        raise ValueError(f"{name} must be a number from 0 to 2**53 (got {value!r:.40})")
    return value


def _non_negative(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def _origin_id(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"id must be a positive integer (got {value!r:.40})")
    return value


def _source_hash(value) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ValueError("source_hash must be a non-empty string of at most 200 characters")
    return value
