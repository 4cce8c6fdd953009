"""Transcripts: their readers, and how a summarized conversation becomes memorize's fields
(shared by `aokun ingest` and the summarize_memory tool).

Readers:
- text: "Name: text" lines (shared.summarize.parse_conversation);
- our JSON turns: a JSON list of {speaker, text, time?}, or one such object a line;
- Claude Code's session transcript (JSONL, one entry a line): "user" and "assistant" entries
  become turns; their text blocks are kept, tool calls, tool results and thinking are not, and
  neither are lines that are no message (summaries, snapshots, queue operations).

Both `aokun ingest` and the summarize_memory tool store what they summarize the same way:
memorize_once with the hash of the normalised transcript, so a conversation stored twice is
one memory. Hosts that can run a command at the end of a session (Claude Code's SessionEnd and
PreCompact hooks) call `aokun ingest --from-hook`, which reads the hook's JSON on stdin.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import datetime, timezone, tzinfo
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

from shared.errors import InvalidInput
from shared.extract.subjects import ASSISTANT, fact_subject, role_of
from shared.memory_rules import check_time_range, lone_surrogate_problem
from shared.store.model.documents import MemoryFields
from shared.summarize.conversation import Turn, parse_conversation, transcript
from shared.summarize.transcript_lines import Advance, Warn, checked_size, file_lines
from shared.time_zone import on_clock

if TYPE_CHECKING:  # pydantic loads only where a summary is made, not for every `aokun` command
    from shared.summarize.schema import StructuredMemory

FORMATS = ("auto", "jsonl", "text")
CLAUDE_SPEAKERS = ("user", "assistant")
# Claude Code records slash commands and their output as user text; they are no conversation.
_COMMAND_RECORD = re.compile(r"^\s*(<(command|local-command)-[a-z]+>|\[Request interrupted by user)")


log = logging.getLogger(__name__)


# -- readers --------------------------------------------------------------------------------


def read_transcript(path: Path, fmt: str = "auto", warn: Warn | None = None,
                    advance: Advance = lambda n: None) -> list[Turn]:
    """The turns of a transcript file ([] when it holds no text), read a line at a time within
    the limits of transcript_lines.py (a line over them skipped, with `warn`); InvalidInput
    when it cannot be read, is too large or is malformed. `advance` is told the bytes read."""
    name = str(path)
    checked_size(path)
    warn = warn or (lambda message: log.warning("%s", message))
    lines = file_lines(path, warn, advance)
    first: list[tuple[int, str]] = []
    for numbered in lines:  # up to the first line with text: what the file holds
        first.append(numbered)
        if numbered[1].strip():
            break
    numbered_lines = chain(first, lines)
    head = first[-1][1].lstrip()[:1] if first else ""
    if fmt == "auto":
        fmt = "jsonl" if head in ("{", "[") else "text"
    if fmt == "text":
        turns = _turns("\n".join(line for _, line in numbered_lines))
    elif head == "[":
        turns = turns_from_json("\n".join(line for _, line in numbered_lines), name)
    else:
        turns = _turns_from_lines(numbered_lines, name)
    return storable(in_range(turns, name), name, warn)


def in_range(turns: list[Turn], name: str) -> list[Turn]:
    """The turns; InvalidInput when a turn's time, its offset applied, falls outside the
    years a stored time may take (memory_rules.check_time_range)."""
    for index, turn in enumerate(turns):
        if turn.time is not None:
            check_time_range(turn.time, f"{name}: turn {index + 1}'s time")
    return turns


def storable(turns: list[Turn], name: str, warn: Warn) -> list[Turn]:
    """The turns with every lone UTF-16 surrogate (a JSON escape such as \\ud800, which no
    UTF-8 text can hold) replaced by U+FFFD, with one warning: a session is not lost over
    one broken character."""
    fixed, replaced = [], 0
    for turn in turns:
        speaker, text = _replace_surrogates(turn.speaker), _replace_surrogates(turn.text)
        replaced += speaker[1] + text[1]
        fixed.append(replace(turn, speaker=speaker[0], text=text[0]) if speaker[1] or text[1] else turn)
    if replaced:
        warn(f"{name}: {replaced} invalid character(s) (lone UTF-16 surrogates) replaced with U+FFFD")
    return fixed


def _replace_surrogates(value: str) -> tuple[str, int]:
    """(value with its lone surrogates as U+FFFD, how many); json.loads has already joined
    every valid pair into one character, so each surrogate left is a lone one."""
    if lone_surrogate_problem(value) is None:
        return value, 0
    count = sum(1 for char in value if "\ud800" <= char <= "\udfff")
    return "".join("\ufffd" if "\ud800" <= char <= "\udfff" else char for char in value), count


def _loads(raw: str):
    """json.loads; RecursionError (brackets nested past what the parser takes) as ValueError."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply (lists or objects inside one another)") from None


def turns_from_json(raw: str, name: str) -> list[Turn]:
    """Turns from a JSON list of turns, or from JSON lines (our turns or Claude Code entries)."""
    stripped = raw.strip()
    if stripped.startswith("["):
        try:
            items = _loads(stripped)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{name} is not valid JSON: {exc}") from None
        except ValueError as exc:
            raise InvalidInput(f"{name} is {exc}") from None
        return _turns(items)
    return _turns_from_lines(enumerate(raw.splitlines(), 1), name)


def _turns_from_lines(lines: Iterable[tuple[int, str]], name: str) -> list[Turn]:
    """Turns from JSON lines, our turns or Claude Code entries (then only those count), each
    entry kept only for its text while the rest is read."""
    claude: list[dict] = []
    ours: list[dict] = []
    for entry in json_lines(lines, name):
        if is_claude_entry(entry):
            text = _entry_text(entry)
            if text:
                claude.append({"type": entry["type"], "timestamp": entry.get("timestamp"),
                               "message": {"id": entry["message"].get("id"), "content": text}})
        elif not claude:
            ours.append(entry)
    return _turns(claude_turns(claude)) if claude else _turns(ours)


def _turns(conversation) -> list[Turn]:
    """parse_conversation, except that a transcript with no text yet is no turns, not an error
    (a hook may fire on a session that said nothing)."""
    if isinstance(conversation, str):
        blank = not conversation.strip()
    else:
        blank = isinstance(conversation, list) and all(
            isinstance(item, dict) and isinstance(item.get("text"), str) and not item["text"].strip()
            for item in conversation)
    return [] if blank else parse_conversation(conversation)


def json_lines(lines: Iterable[tuple[int, str]], name: str) -> Iterator[dict]:
    """One JSON object a (numbered) line. A cut last line is dropped: a host may still be
    writing it."""
    cut: str | None = None  # the error of a line that is no JSON, unless it is the last
    position = 0
    for number, line in lines:
        if not line.strip():
            continue
        if cut is not None:
            raise InvalidInput(cut)
        try:
            entry = _loads(line)
        except json.JSONDecodeError as exc:
            cut = (f"{name} line {number} is not JSON ({exc.msg}): use --format text "
                   "for a plain transcript")
            if position == 0:
                raise InvalidInput(cut) from None
            continue
        except ValueError as exc:
            raise InvalidInput(f"{name} line {number} is {exc}") from None
        finally:
            position += 1
        if not isinstance(entry, dict):
            raise InvalidInput(f"{name} line {number} is not a JSON object")
        yield entry


def is_claude_entry(entry: dict) -> bool:
    return "message" in entry or ("type" in entry and "text" not in entry)


def claude_turns(entries: Iterable[dict]) -> list[dict]:
    """Claude Code entries as {speaker, text, time} turns. One assistant message is written as
    several entries (one per content block) sharing a message id: they make one turn."""
    turns: list[dict] = []
    last_message_id = None
    for entry in entries:
        text = _entry_text(entry)
        if not text:
            continue
        message_id = entry["message"].get("id")
        if message_id and message_id == last_message_id and turns:
            turns[-1]["text"] += "\n" + text
            continue
        turns.append({"speaker": entry["type"], "text": text, "time": entry.get("timestamp")})
        last_message_id = message_id
    return turns


def _entry_text(entry: dict) -> str:
    """The conversation text of one Claude Code entry ("" for anything else). Sidechains
    (sub-agents' own exchanges), meta lines and the summary written at compaction are no
    turns of this conversation."""
    message = entry.get("message")
    if (entry.get("type") not in CLAUDE_SPEAKERS or not isinstance(message, dict)
            or entry.get("isSidechain") or entry.get("isMeta") or entry.get("isCompactSummary")):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [block.get("text", "") for block in content
                 if isinstance(block, dict) and block.get("type") == "text"]
    else:
        parts = []
    kept = [p.strip() for p in parts if isinstance(p, str) and p.strip() and not _COMMAND_RECORD.match(p)]
    return "\n".join(kept)


def modified_time(path: Path) -> datetime | None:
    """When a transcript file was last written (aware, UTC)."""
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).replace(microsecond=0)
    except OSError:
        return None  # reading it will say what is wrong


def hook_input(raw: str) -> dict:
    """The JSON a host hook passes on stdin (Claude Code: session_id, transcript_path, ...)."""
    try:
        data = _loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"--from-hook: stdin is not the hook's JSON ({exc.msg})") from None
    except ValueError as exc:
        raise InvalidInput(f"--from-hook: stdin is not the hook's JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("transcript_path"), str) \
            or not data["transcript_path"].strip():
        raise InvalidInput("--from-hook: the hook's JSON on stdin has no transcript_path")
    return data


# -- storing a summarized conversation ------------------------------------------------------


def dated(turns: list[Turn], when: datetime | None, zone: tzinfo) -> list[Turn]:
    """The turns with their times on the clock they were said on (time_zone.on_clock: Claude
    Code's "...Z" and a time without an offset on the user's, `zone`), so that a turn's
    "tomorrow" or "January 15" is the speaker's day. A conversation in which no turn has
    a time took place `when` (the tool's call, the file's last write), so that its dates
    resolve and its memory has a time; one with some times keeps them, and the rules resolve
    against the latest known."""
    if when is not None and all(t.time is None for t in turns):
        turns = [replace(t, time=when) for t in turns]
    return [replace(t, time=on_clock(t.time, zone)) if t.time is not None else t for t in turns]


def source_hash(turns: list[Turn], persona_id: str | None) -> str:
    """What makes two stores of a conversation the same: its normalised transcript, for the
    same persona (the same conversation remembered for another persona is another memory)."""
    text = f"{persona_id or ''}\n{transcript(turns)}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def last_time(turns: list[Turn]) -> datetime | None:
    """When the conversation ended, as far as its turns say (None when none has a time)."""
    return next((t.time for t in reversed(turns) if t.time is not None), None)


def memory_fields(memory: StructuredMemory, turns: list[Turn], persona_id: str | None,
                  session_id: str | None) -> MemoryFields:
    """The summary's fields as memorize takes them, with the conversation's source hash and
    its end as original_time. The memory service checks them when they are stored (or by
    MemoryService.checked), as it checks every memory's. A transcript's roles ("user",
    "assistant") are no participants (no person nodes), and a key fact of the assistant's is
    none about the user."""
    return MemoryFields(
        topics=tuple(memory.topics), participants=tuple(p for p in memory.participants if role_of(p) is None),
        key_facts=tuple(f for f in memory.key_facts if fact_subject(f) != ASSISTANT), sentiment=memory.sentiment,
        importance=float(memory.importance), persona_summary=memory.persona_summary,
        persona_id=persona_id, session_id=session_id, original_time=last_time(turns),
        source_hash=source_hash(turns, persona_id))
