"""The MCP server class: which tools are listed and callable, how a failed call reads, and the
stdio transport.

Every tool call passes through `AokunMCPServer.call_tool`, so one place decides what a failure
looks like to the model: one line, no pydantic boilerplate, no documentation URLs, and never
the SDK's bare "Error executing tool X". The rule: arguments that do not fit the schema, and
our own errors (AokunError, which tools turn into ToolError: aokun_server/tooling.py), are the
caller's to read, their one-line message; anything else is a bug, logged with its traceback
(by the SDK, "Tool X raised an unexpected exception") and answered "X failed: internal error
(TypeName); see the server log", without the exception's own text.

The listed tools can change while clients are connected (server.exposed_tools, live): each is
then told `notifications/tools/list_changed`, the way its protocol era allows (ToolListClients).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import json
import logging
import re
import types
import typing
from typing import Any, Iterable

from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged
from pydantic import BaseModel, ValidationError

from aokun_server.arguments import check_call

log = logging.getLogger("aokun.front")

MAX_MESSAGE_CHARS = 1000
MAX_SHOWN_ERRORS = 5
_SHOWN_INPUT_CHARS = 60

_SIMPLE = {
    "missing": "is required",
    "int_type": "must be an integer", "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be true or false", "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "string_unicode": "holds an invalid character (a lone UTF-16 surrogate)",
    "float_type": "must be a number", "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "list_type": "must be a list",
    "dict_type": "must be an object", "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}
_BOUNDS = {"greater_than_equal": ("ge", "at least"), "greater_than": ("gt", "more than"),
           "less_than_equal": ("le", "at most"), "less_than": ("lt", "less than")}


class AokunMCPServer(MCPServer):
    """MCPServer that lists only the configured tools (and calls only those), checks every
    call's arguments one way (aokun_server/arguments.py), reports every failed call in one
    line, and answers unparseable stdio lines."""

    def __init__(self, *args, exposed_tools: tuple[str, ...], **kwargs):
        self._bus = InMemorySubscriptionBus()
        super().__init__(*args, subscriptions=self._bus, **kwargs)
        self._exposed = frozenset(exposed_tools)
        self._clients = ToolListClients(self._bus)
        self.middleware.append(self._clients.observe)
        # Handshake-era clients learn from the initialize result that the list may change.
        # Every transport builds that result through this method (HTTP calls it bare).
        lowlevel = self._lowlevel_server
        lowlevel.create_initialization_options = functools.partial(
            lowlevel.create_initialization_options, NotificationOptions(tools_changed=True))

    async def list_tools(self):
        return [tool for tool in await super().list_tools() if tool.name in self._exposed]

    def expose(self, tools: Iterable[str]) -> None:
        """List `tools` from now on and tell connected clients (callable from any thread)."""
        tools = frozenset(tools)
        if tools != self._exposed:
            self._exposed = tools
            self._clients.announce()

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        try:
            tool = self._tool_manager.get_tool(name)
            if tool is not None:  # an unknown name: the SDK's "Unknown tool: X"
                arguments = check_call(tool, arguments, self._exposed)
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            # Still an UnexpectedToolError, so the SDK logs the traceback; the cause is kept.
            raise UnexpectedToolError(crash_message(name, exc)) from exc.__cause__
        except ToolError as exc:
            tool = self._tool_manager.get_tool(name)
            arg_model = tool.fn_metadata.arg_model if tool is not None else None
            raise ToolError(failure_message(exc, arg_model)) from exc.__cause__

    async def run_stdio_async(self) -> None:
        """Serve over stdin/stdout, answering lines the SDK would drop with a JSON-RPC error."""
        from aokun_server.stdio import stdio_transport

        async with stdio_transport() as (read_stream, write_stream):
            await self._lowlevel_server.run(read_stream, write_stream,
                                            self._lowlevel_server.create_initialization_options())


class ToolListClients:
    """Connected clients to tell that the tool list changed.

    2026-07-28 clients hear it on the `subscriptions/listen` streams they opened (the bus);
    handshake-era clients on their connection, reached through the session their
    `notifications/initialized` came with. The SDK has no hook for a connection closing, so
    the newest MAX_HANDSHAKE_CLIENTS are kept (telling a closed one is a no-op).
    """

    MAX_HANDSHAKE_CLIENTS = 256

    def __init__(self, bus: InMemorySubscriptionBus):
        self.bus = bus
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sessions: collections.deque = collections.deque(maxlen=self.MAX_HANDSHAKE_CLIENTS)

    async def observe(self, ctx, call_next):
        """Server middleware: note the serving loop and each handshake-era client."""
        self._loop = asyncio.get_running_loop()
        if ctx.method == "notifications/initialized":
            self._sessions.append(ctx.session)
        return await call_next(ctx)

    def announce(self) -> None:
        """Send the notification from the serving loop (nobody to tell before a client came)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(self._send(), loop)

    async def _send(self) -> None:
        await self.bus.publish(ToolsListChanged())
        for session in list(self._sessions):
            try:
                await session.send_tool_list_changed()
            except Exception as exc:  # a client gone; the others still hear of it
                log.debug("could not tell a client its tool list changed: %s", exc)


def failure_message(exc: ToolError, arg_model: type[BaseModel] | None = None) -> str:
    """The one line a deliberate failure (bad arguments, a ToolError from a tool) shows."""
    cause = exc.__cause__
    if isinstance(cause, (ToolError, ResourceError)):  # the tool's own error, under the SDK's prefix
        exc, cause = cause, cause.__cause__
    if isinstance(cause, ValidationError):
        return describe_validation_error(cause, arg_model)
    return one_line(str(exc))


def crash_message(tool: str, exc: UnexpectedToolError) -> str:
    """The one line a bug shows (any exception that is no AokunError, a result that does not
    fit its declared model included): an internal error of which tool, and the exception's
    type. Its text is not shown: it is the code's (paths, SQL), not the caller's to act on;
    the server log has it, with the traceback."""
    root: BaseException = exc
    while isinstance(root, ToolError) and root.__cause__ is not None:
        root = root.__cause__
    return one_line(f"{tool} failed: internal error ({type(root).__name__}); see the server log")


def one_line(text: str) -> str:
    text = re.sub(r"\s*[\r\n]+\s*", " ", text).strip()
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 1] + "…"


def describe_validation_error(exc: ValidationError, arg_model: type[BaseModel] | None = None) -> str:
    """pydantic's report as one line: "field.path: what is expected (got what was sent)"."""
    parts: list[str] = []
    for error in exc.errors(include_url=False):
        part = describe_error(error, arg_model)
        if part not in parts:
            parts.append(part)
    if len(parts) > MAX_SHOWN_ERRORS:
        parts = parts[:MAX_SHOWN_ERRORS] + [f"and {len(parts) - MAX_SHOWN_ERRORS} more problems"]
    return one_line("; ".join(parts))


def describe_error(error: dict, arg_model: type[BaseModel] | None = None) -> str:
    where = field_path(error["loc"])
    what = expectation(error)
    if error["type"] == "extra_forbidden" and arg_model is not None:
        accepted = accepted_keys(arg_model, error["loc"][:-1])
        if accepted:
            what += f" (accepted: {', '.join(accepted)})"
    return f"{where}: {what}" if where else what


def field_path(loc: tuple) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def expectation(error: dict) -> str:
    """What the field must be, and what came instead when that helps."""
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    if kind == "extra_forbidden":
        return "is not an accepted key"
    if kind == "missing":
        return _SIMPLE[kind]
    if kind in _SIMPLE:
        return f"{_SIMPLE[kind]} (got {shown(value)})"
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"must be {words} {_bound(ctx[key])} (got {shown(value)})"
    if kind == "string_too_short":
        n = ctx["min_length"]
        return "must not be empty" if n == 1 else f"must be at least {n} characters"
    if kind == "string_too_long":
        return f"must be at most {ctx['max_length']} characters (got {len(value)})"
    if kind == "too_short":
        return f"must have at least {ctx['min_length']} items (got {ctx.get('actual_length')})"
    if kind == "too_long":
        return f"must have at most {ctx['max_length']} items (got {ctx.get('actual_length')})"
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx['expected']} (got {shown(value)})"
    message = error["msg"]
    return f"{message[:1].lower()}{message[1:]} (got {shown(value)})"


def shown(value: Any) -> str:
    """A short JSON rendering of what the caller sent."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # a circular structure cannot come from JSON, but never fail here
        text = repr(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # lone surrogates, visibly
    if len(text) > _SHOWN_INPUT_CHARS:
        text = text[:_SHOWN_INPUT_CHARS - 1] + "…"
    return text


def _bound(limit: Any) -> str:
    # "at most 1", not "at most 1.0": the schema's 1.0 reads as a float-only rule.
    if isinstance(limit, float) and limit.is_integer():
        return str(int(limit))
    return str(limit)


def accepted_keys(model: type[BaseModel], path: tuple) -> list[str]:
    """The keys the model reached by path accepts ([] when path does not lead to a model)."""
    for part in path:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        model = _model_in(field.annotation) if field is not None else None
        if model is None:
            return []
    return list(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for member in typing.get_args(annotation):
            found = _model_in(member)
            if found is not None:
                return found
    return None
