"""Which format an import file holds, and its rows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import chain, islice
from pathlib import Path

from shared.errors import InvalidInput
from shared.transfer import chats, json_array, jsonl, markdown, mcp_memory
from shared.transfer.rows import BadRow, Row, parse_json

FORMATS = ("jsonl", "mcp-memory", "markdown")
_SNIFF_LINES = 20


def detect_format(path: Path) -> str:
    """markdown for a folder or a .md file; chatgpt or claude for a JSON array of their
    conversations; for JSON lines, what their first objects look like. InvalidInput when
    nothing tells."""
    _exists(path)
    if path.is_dir() or path.suffix.lower() in markdown.SUFFIXES:
        return "markdown"
    chat = _chat_format(path)
    if chat is not None:
        return chat
    for raw in islice(_lines(path), _SNIFF_LINES):
        try:
            item = parse_json(raw)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        if item.get("format") == jsonl.FORMAT or "text" in item:
            return "jsonl"
        if item.get("type") in mcp_memory.TYPES:
            return "mcp-memory"
    raise InvalidInput(f"cannot tell what {path} holds: give --format jsonl (an Aokun export), "
                       "mcp-memory (the MCP memory server's memory.jsonl), markdown, chatgpt or claude "
                       "(their conversations.json)")


def _chat_format(path: Path) -> str | None:
    """chatgpt or claude for a JSON array whose first item is one of their conversations
    (only that item is read); None for anything else, whose lines then tell."""
    with _opened(path) as handle:
        try:
            first = next(json_array.array_items(handle), None)
        except json_array.NotAnArray:
            return None
    return None if first is None else chats.detect(first.value)


def read_rows(path: Path, fmt: str, advance: Callable[[int], object] = lambda n: None) -> Iterator[Row | BadRow]:
    """Every row of the file (or folder) in the given format, bad ones included, read as they
    are imported: a file a line at a time, `advance` told the bytes of each line read (a
    folder of notes: a note at a time, `advance` told nothing). InvalidInput, before any row,
    when the file cannot be read."""
    _exists(path)
    if fmt == "markdown":
        return markdown.read_rows(path)
    if path.is_dir():
        raise InvalidInput(f"{path} is a folder: --format {fmt} reads a file (a folder is markdown)")
    reader = jsonl.read_rows if fmt == "jsonl" else mcp_memory.read_rows
    rows = reader(_lines(path, advance, _opened(path)), path.name)
    first = next(rows, None)  # a header from another format or a newer Aokun: refused now
    return rows if first is None else chain([first], rows)


def _exists(path: Path) -> None:
    if not path.exists():
        raise InvalidInput(f"{path} not found: give the file (or folder of notes) to import")


def _opened(path: Path):
    try:
        return path.open("rb")
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None


def _lines(path: Path, advance: Callable[[int], object] = lambda n: None, handle=None) -> Iterator[str]:
    """The file's lines, one at a time. Split on newlines only: a JSON string may hold U+2028
    and the like, which str.splitlines would cut. Bytes that are no UTF-8 are kept as
    U+DC80..U+DCFF (surrogateescape), so their row is reported as invalid UTF-8
    (rows.undecodable) and skipped rather than the file refused."""
    with handle or _opened(path) as lines:
        first = True
        for data in lines:
            advance(len(data))
            if first:
                data, first = data.removeprefix(b"\xef\xbb\xbf"), False
            yield data.decode("utf-8", errors="surrogateescape").removesuffix("\n").removesuffix("\r")
