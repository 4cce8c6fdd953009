"""MCP over stdin/stdout that answers every line, including the ones it cannot read.

The SDK's stdio transport decodes invalid UTF-8 into U+FFFD (storing altered text without a
word) and hands lines it cannot parse to the session, which drops them: the host then waits
forever for a reply. Here each line is decoded strictly and parsed; one that fails gets a
JSON-RPC error on stdout (-32700 parse error, or -32600 for JSON that is not a JSON-RPC
message), and the server keeps serving.

As in the SDK, fd 0 and fd 1 are pointed at /dev/null and stderr while serving, so a stray
print or a child process cannot corrupt the wire, and restored on exit.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import BinaryIO, cast

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger("aokun.stdio")


@asynccontextmanager
async def stdio_transport(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None):
    """Yield (read_stream, write_stream) for `Server.run`, serving the process's stdio
    unless binary streams are given."""
    with _claimed(0, sys.stdin, "rb", _null_reader, stdin) as raw_in, \
            _claimed(1, sys.stdout, "wb", _stderr_writer, stdout) as raw_out:
        lines, out = anyio.wrap_file(raw_in), anyio.wrap_file(raw_out)
        to_server, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, from_server = anyio.create_memory_object_stream[SessionMessage](0)
        replies = write_stream.clone()  # the reader's own way to the writer

        async def read_lines() -> None:
            async with to_server, replies:
                async for raw in lines:
                    parsed = parse_line(raw)
                    if isinstance(parsed, types.JSONRPCError):
                        log.info("answered an unreadable line: %s", parsed.error.message)
                        await replies.send(SessionMessage(parsed))
                    elif parsed is not None:
                        await to_server.send(SessionMessage(parsed))

        async def write_messages() -> None:
            async with from_server:
                async for item in from_server:
                    await out.write(serialize(item.message))
                    await out.flush()

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_lines)
            tg.start_soon(write_messages)
            try:
                yield read_stream, write_stream
            finally:
                write_stream.close()  # the writer ends once the reader's clone closes too


def parse_line(raw: bytes) -> types.JSONRPCMessage | types.JSONRPCError | None:
    """One line from the host: a message, the error to answer it with, or None (blank)."""
    if not raw.strip():
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error(raw, types.PARSE_ERROR, f"Parse error: the line is not valid UTF-8 "
                      f"(byte 0x{raw[exc.start]:02x} at offset {exc.start}); send UTF-8 JSON")
    try:
        return types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
    if any(e["type"] == "json_invalid" for e in errors):
        detail = errors[0]["msg"].removeprefix("Invalid JSON: ")
        if _loads(text) is not None:  # Python's parser takes it: a lone surrogate escape
            detail = f"a lone UTF-16 surrogate escape such as \\ud800 is not valid Unicode ({detail})"
        return _error(raw, types.PARSE_ERROR, f"Parse error: {detail}")
    return _error(raw, types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request, "
                  "notification or response object")


def _error(raw: bytes, code: int, message: str) -> types.JSONRPCError:
    # The id is null unless the line, read leniently, names one: then the host's pending
    # request ends instead of waiting.
    return types.JSONRPCError(jsonrpc="2.0", id=_request_id(raw),
                              error=types.ErrorData(code=code, message=message))


def _request_id(raw: bytes) -> int | str | None:
    message = _loads(raw.decode("utf-8", "surrogateescape"))  # a bad byte in the id: null
    ident = message.get("id") if isinstance(message, dict) else None
    if isinstance(ident, str) and not _encodable(ident):
        return None  # a lone surrogate such as "\ud800" cannot be echoed as UTF-8: null
    return ident if isinstance(ident, (int, str)) and not isinstance(ident, bool) else None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def serialize(message: types.JSONRPCMessage) -> bytes:
    """One reply line. A reply that cannot be written as UTF-8 JSON (an id or a text holding a
    lone surrogate) becomes a JSON-RPC error with the id kept when it can be echoed, else null:
    the host hears something and the server keeps serving."""
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
    except (ValueError, UnicodeError) as exc:  # pydantic's serialization error is a ValueError
        ident = getattr(message, "id", None)
        if isinstance(ident, str) and not _encodable(ident):
            ident = None
        log.warning("a reply could not be written as UTF-8 JSON: %s", str(exc)[:200])
        error = types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(
            code=types.INTERNAL_ERROR, message="Internal error: the reply could not be written as "
            "UTF-8 JSON (a lone UTF-16 surrogate in it)"))
        return error.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"


def _loads(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


@contextmanager
def _claimed(fd: int, stream, mode: str, open_diversion: Callable[[], int],
             given: BinaryIO | None) -> Iterator[BinaryIO]:
    """Serve the wire from a private duplicate of fd while fd itself points elsewhere."""
    if given is not None:
        yield given
        return
    try:
        if stream is None or stream.fileno() != fd:
            raise OSError(f"sys stream is not fd {fd}")
        private = os.dup(fd)  # not inherited by children (PEP 446)
    except (OSError, AttributeError, ValueError):
        # Embedded or redirected: serve the stream as it is. (With no stream at all, None, this
        # raises AttributeError, as it always has.)
        yield stream.buffer  # pyright: ignore[reportOptionalMemberAccess]
        return
    diversion = open_diversion()
    os.dup2(diversion, fd)
    os.close(diversion)
    try:
        # closefd=False: a thread may still block reading it after we return; the process
        # exits soon after, and a recycled descriptor under that thread would be worse.
        with os.fdopen(private, mode, closefd=False) as wire:
            yield cast(BinaryIO, wire)  # mode is a binary one ("rb" or "wb")
    finally:
        os.dup2(private, fd)


def _null_reader() -> int:
    return os.open(os.devnull, os.O_RDONLY)


def _stderr_writer() -> int:
    try:
        return os.dup(2)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)
