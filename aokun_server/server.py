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
import logging
from collections.abc import Iterable
from typing import Any

from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged
from pydantic import BaseModel, ValidationError

from aokun_server.arguments import check_call
from aokun_server.stdio import stdio_transport
from shared.api.validation import describe_validation_error, one_line

log = logging.getLogger("aokun.front")

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
        # The SDK's own method with its first argument bound (a partial, so no signature to match).
        lowlevel.create_initialization_options = functools.partial(  # pyright: ignore[reportAttributeAccessIssue]
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
    shown: Exception = exc
    cause = exc.__cause__
    if isinstance(cause, (ToolError, ResourceError)):  # the tool's own error, under the SDK's prefix
        shown, cause = cause, cause.__cause__
    if isinstance(cause, ValidationError):
        return describe_validation_error(cause, arg_model)
    return one_line(str(shown))


def crash_message(tool: str, exc: UnexpectedToolError) -> str:
    """The one line a bug shows (any exception that is no AokunError, a result that does not
    fit its declared model included): an internal error of which tool, and the exception's
    type. Its text is not shown: it is the code's (paths, SQL), not the caller's to act on;
    the server log has it, with the traceback."""
    root: BaseException = exc
    while isinstance(root, ToolError) and root.__cause__ is not None:
        root = root.__cause__
    return one_line(f"{tool} failed: internal error ({type(root).__name__}); see the server log")


