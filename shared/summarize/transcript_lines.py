"""How much of a transcript `aokun ingest` reads and summarizes, and its lines read one at a time.

The limits, in one place. `aokun ingest` runs from a host's hook (Claude Code's SessionEnd hook
has a 120 s timeout), so a session must finish well within that, in bounded memory:
- MAX_FILE_BYTES: a longer file is refused. Claude Code sessions are mostly tool traffic, which
  is not kept; 64 MB holds weeks of conversation, and the kept text stays well under the
  memory a summary needs.
- MAX_LINE_BYTES: a longer line is skipped with a warning naming it (the rest is read). A
  line is one message; 1 MB of it is a pasted log or a file, not conversation, and a 52 MB line
  parsed as JSON took 1.5 GB.
- MAX_TURN_CHARS, MAX_SUMMARIZED_CHARS: what the summarizer reads. The rules summarizer takes
  ~10-30 s per MB of text (entity and relation rules run on every sentence), and a model has a
  context window: a turn is summarized from its first MAX_TURN_CHARS characters, and the
  conversation from its latest turns up to MAX_SUMMARIZED_CHARS in all (a session's end is
  what it came to). The whole conversation is still what identifies the memory (source_hash).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from shared.errors import InvalidInput
from shared.summarize.conversation import Turn

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024
MAX_TURN_CHARS = 20_000
MAX_SUMMARIZED_CHARS = 200_000
_CHUNK = 1024 * 1024

Warn = Callable[[str], object]
Advance = Callable[[int], object]


def size_text(count: int) -> str:
    return f"{count / 1024 / 1024:.1f} MB" if count >= 1024 * 1024 else f"{count} bytes"


def checked_size(path: Path) -> int:
    """The file's size; InvalidInput when it cannot be read or is over MAX_FILE_BYTES."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise InvalidInput(f"transcript not found: {path}") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read transcript {path}: {exc.strerror or exc}") from None
    if path.is_dir():
        raise InvalidInput(f"cannot read transcript {path}: it is a folder")
    if size > MAX_FILE_BYTES:
        raise InvalidInput(f"transcript {path} is {size_text(size)}; at most {size_text(MAX_FILE_BYTES)} "
                           "is ingested: split it, or ingest the part to remember")
    return size


def file_lines(path: Path, warn: Warn, advance: Advance = lambda n: None) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line, read one at a time: a line over MAX_LINE_BYTES is
    skipped with a warning (never held whole); bytes that are no UTF-8 are InvalidInput
    naming line and byte."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InvalidInput(f"cannot read transcript {path}: {exc.strerror or exc}") from None
    with handle:
        number, read = 0, 0
        while True:
            data = handle.readline(MAX_LINE_BYTES + 1)
            if not data:
                return
            number += 1
            read += len(data)
            if len(data) > MAX_LINE_BYTES and not data.endswith(b"\n"):
                size = len(data)
                while data and not data.endswith(b"\n"):  # the rest of the line, never kept
                    data = handle.readline(_CHUNK)
                    size += len(data)
                    read += len(data)
                advance(read)
                read = 0
                warn(f"{path} line {number} is {size_text(size)} long, over the "
                     f"{size_text(MAX_LINE_BYTES)} a line may hold: skipped")
                continue
            advance(read)
            read = 0
            if number == 1:
                data = data.removeprefix(b"\xef\xbb\xbf")
            yield number, _decoded(data, path, number).rstrip("\r\n")


def _decoded(data: bytes, path: Path, number: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"cannot read transcript {path}: not valid UTF-8: byte "
                           f"0x{data[exc.start]:02x} at line {number}, byte {exc.start + 1}; save it as "
                           "UTF-8") from None


def to_summarize(turns: list[Turn]) -> tuple[list[Turn], list[str]]:
    """The turns the summarizer reads (each at most MAX_TURN_CHARS, the latest ones up to
    MAX_SUMMARIZED_CHARS in all), and warnings saying what was left out."""
    warnings = []
    long_turns = [i for i, t in enumerate(turns) if len(t.text) > MAX_TURN_CHARS]
    if long_turns:
        turns = [replace(t, text=t.text[:MAX_TURN_CHARS]) if len(t.text) > MAX_TURN_CHARS else t
                 for t in turns]
        named = ", ".join(str(i + 1) for i in long_turns[:5]) + (", ..." if len(long_turns) > 5 else "")
        warnings.append(f"{len(long_turns)} turn(s) over {MAX_TURN_CHARS} characters (turn {named}): "
                        f"each summarized from its first {MAX_TURN_CHARS}")
    total, start = 0, len(turns)
    while start > 0 and total + len(turns[start - 1].text) <= MAX_SUMMARIZED_CHARS:
        start -= 1
        total += len(turns[start].text)
    if start == len(turns):  # not even the last turn fits: can only happen if limits change
        start = len(turns) - 1
    if start > 0:
        warnings.append(f"the conversation holds more than {MAX_SUMMARIZED_CHARS} characters: its "
                        f"last {len(turns) - start} of {len(turns)} turns summarized")
        turns = turns[start:]
    return turns, warnings
