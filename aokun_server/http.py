"""Streamable HTTP transport: the SDK's app behind a gate that finds who each request is."""

from __future__ import annotations

import json
import logging
import socket

import anyio
from mcp.server.mcpserver import MCPServer

from aokun_server.identity import Identity, requested_by
from shared.errors import StorageError
from shared.logs import uvicorn_log_config

log = logging.getLogger("aokun.front")


class TokenGate:
    """ASGI middleware: every HTTP request is served as the principal of its
    'Authorization: Bearer <token>' (server.token: the admin; a user's token: that user), or
    refused with 401. Checked on every request, so a token revoked meanwhile is refused at
    once, also on a session opened before."""

    def __init__(self, app, identity: Identity):
        self.app = app
        self.identity = identity

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            # A store read: off the event loop, as every other one.
            principal = await anyio.to_thread.run_sync(self.identity.of_request, _authorization(scope))
        except StorageError as exc:
            log.warning("could not check a request's token: %s", exc)
            await _answer(send, 503, "unavailable", f"the token could not be checked: {exc}")
            return
        if principal is None:
            await _answer(send, 401, "unauthorized",
                          "send your token as 'Authorization: Bearer <token>'")
            return
        with requested_by(principal):
            await self.app(scope, receive, send)


def _authorization(scope) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return value
    return None


async def _answer(send, status: int, error: str, message: str) -> None:
    body = json.dumps({"error": error, "message": message}).encode()
    headers = [(b"content-type", b"application/json")]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="aokun"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve_http(server: MCPServer, listener: socket.socket, host: str, identity: Identity,
               log_level: str) -> None:
    """Serve MCP at http://host:port/mcp on the listener bind_listener gave, until interrupted.
    `host` as configured: the SDK's DNS-rebinding protection is keyed on it."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
    identity.gated = True  # from now on a call must come with its request's principal
    config = uvicorn.Config(app=TokenGate(app, identity), log_level=log_level.lower(),
                            log_config=uvicorn_log_config())
    uvicorn.Server(config).run(sockets=[listener])
