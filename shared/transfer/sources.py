"""Which format an import file holds, and its rows."""

from __future__ import annotations

from pathlib import Path

from shared.errors import InvalidInput
from shared.transfer import jsonl, markdown, mcp_memory
from shared.transfer.rows import BadRow, Row, parse_json

FORMATS = ("jsonl", "mcp-memory", "markdown")
_SNIFF_LINES = 20


def detect_format(path: Path) -> str:
    """markdown for a folder or a .md file; for JSON lines, what their first objects look
    like. InvalidInput when nothing tells."""
    _exists(path)
    if path.is_dir() or path.suffix.lower() in markdown.SUFFIXES:
        return "markdown"
    for raw in _lines(path)[:_SNIFF_LINES]:
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
                       "mcp-memory (the MCP memory server's memory.jsonl) or markdown")


def read_rows(path: Path, fmt: str) -> list[Row | BadRow]:
    """Every row of the file (or folder) in the given format, bad ones included."""
    _exists(path)
    if fmt == "markdown":
        return list(markdown.read_rows(path))
    if path.is_dir():
        raise InvalidInput(f"{path} is a folder: --format {fmt} reads a file (a folder is markdown)")
    reader = jsonl.read_rows if fmt == "jsonl" else mcp_memory.read_rows
    return list(reader(_lines(path), path.name))


def _exists(path: Path) -> None:
    if not path.exists():
        raise InvalidInput(f"{path} not found: give the file (or folder of notes) to import")


def _lines(path: Path) -> list[str]:
    """The file's lines. Split on newlines only: a JSON string may hold U+2028 and the like,
    which str.splitlines would cut. Bytes that are no UTF-8 are kept as U+DC80..U+DCFF
    (surrogateescape), so their row is reported as invalid UTF-8 (rows.undecodable) and
    skipped rather than the file refused."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    text = raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="surrogateescape")
    return [line.removesuffix("\r") for line in text.split("\n")]
