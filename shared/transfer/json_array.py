"""The items of one JSON array in a file, read one at a time, each with the byte offset it ends at.

A chat export (ChatGPT's or Claude's conversations.json) is one JSON array, often tens of MB on
one line: it is never held whole. The file is read in chunks and each item decoded by the json
module's own scanner (JSONDecoder.raw_decode) as soon as its end is in the buffer; the buffer
holds one item and a chunk. Each item comes with the byte offset just past it, so a reader can
start again there (`start`): an import that stops is resumed without reading what it did.

Bytes that are no UTF-8 are kept as U+DC80..U+DCFF (surrogateescape), so an item holding them
is reported (rows.undecodable) rather than the file refused; an item that is no JSON at all, or
larger than `max_item_bytes`, ends the reading: nothing after it can be told apart.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

CHUNK = 256 * 1024
_WHITESPACE = " \t\r\n"
_DECODER = json.JSONDecoder()
# A decoding error this close to the buffer's end may be the item cut by the chunk (a \\u
# escape cut in two, a word half read); further back it is the item's own.
_CUT_WITHIN = 16


@dataclass(frozen=True)
class Item:
    """One item of the array: its value, or why it could not be read (then it is the last)."""

    index: int           # 0 for the array's first item
    end: int             # the byte offset just past the item (and its comma): where to start again
    value: object = None
    problem: str | None = None


class NotAnArray(ValueError):
    """The file does not hold a JSON array."""


def array_items(handle: BinaryIO, start: int = 0, index: int = 0, max_item_bytes: int = 64 * 1024 * 1024,
                advance: Callable[[int], object] = lambda n: None) -> Iterator[Item]:
    """The items of the JSON array in `handle` (opened binary), from its start, or from byte
    `start` (an Item.end of an earlier reading, whose item numbers go on from `index`).
    `advance` is told the bytes read. NotAnArray, before any item, when the file holds
    something else."""
    reader = _Reader(handle, start, advance)
    if start == 0:
        reader.skip_bom()
        if reader.peek() != "[":
            raise NotAnArray("not a JSON array" if reader.peek() else "empty")
        reader.take(1)
    while True:
        reader.skip(_WHITESPACE)
        if reader.peek() in ("]", ""):
            return
        item = _decoded(reader, index, max_item_bytes)
        if item.problem is not None:
            yield item
            return
        reader.skip(_WHITESPACE)
        after = reader.peek()
        if after == ",":
            reader.take(1)
        yield Item(index, reader.offset, item.value)
        if after not in (",", "]", ""):
            yield Item(index + 1, reader.offset, problem=f"not JSON: ',' or ']' expected after item {index + 1}")
            return
        index += 1


def _decoded(reader: _Reader, index: int, max_item_bytes: int) -> Item:
    """The item at the reader's position (taken), or why there is none."""
    while True:
        text, pos = reader.buffer, reader.pos
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            unclosed = exc.msg.startswith("Unterminated string")
            problem = "not JSON: a string is not closed" if unclosed else f"not JSON: {exc.msg}"
            at_end = unclosed or exc.pos >= len(text) - _CUT_WITHIN
            if not at_end:
                return Item(index, reader.offset, problem=problem)  # wrong where it is, not cut
            if reader.eof:
                cut = unclosed or exc.pos >= len(text.rstrip())
                return Item(index, reader.offset, problem=problem + (": the file ends inside it" if cut else ""))
        except RecursionError:
            return Item(index, reader.offset, problem="nested too deeply")
        else:
            # A number or word at the buffer's end may go on in the next chunk; a container
            # has been closed, so it is whole.
            if end < len(text) or isinstance(value, (dict, list)) or reader.eof:
                reader.take(end - pos)
                return Item(index, reader.offset, value)
            problem = "not JSON"
        if reader.pending_bytes() > max_item_bytes:
            return Item(index, reader.offset, problem=f"{problem}, or larger than "
                                                      f"{max_item_bytes // (1024 * 1024)} MB")
        reader.more()


class _Reader:
    """A text buffer over a binary file: `pos` in `buffer` is byte `offset` of the file."""

    def __init__(self, handle: BinaryIO, start: int, advance: Callable[[int], object]):
        handle.seek(start)
        self.handle, self.advance = handle, advance
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self.buffer, self.pos, self.offset, self.eof = "", 0, start, False
        self.read_size = CHUNK

    def more(self) -> None:
        """Read a further chunk, twice the last while one item spans them, so an item of n
        bytes is decoded O(log n) times, not O(n / CHUNK)."""
        data = self.handle.read(self.read_size)
        self.advance(len(data))
        self.eof = not data
        if self.pos > len(self.buffer) // 2:  # what was taken is let go
            self.buffer, self.pos = self.buffer[self.pos:], 0
        self.buffer += self.decoder.decode(data, final=self.eof)
        self.read_size = min(self.read_size * 2, 64 * CHUNK)

    def pending_bytes(self) -> int:
        return len(self.buffer) - self.pos  # characters: at least a quarter of the bytes

    def peek(self) -> str:
        while self.pos >= len(self.buffer) and not self.eof:
            self.more()
        return self.buffer[self.pos:self.pos + 1]

    def take(self, count: int) -> None:
        taken = self.buffer[self.pos:self.pos + count]
        self.offset += len(taken.encode("utf-8", "surrogateescape"))
        self.pos += count
        if self.pos >= len(self.buffer):
            self.read_size = CHUNK

    def skip(self, chars: str) -> None:
        while self.peek() and self.buffer[self.pos] in chars:
            self.take(1)

    def skip_bom(self) -> None:
        if self.peek() == "\ufeff":
            self.take(1)
