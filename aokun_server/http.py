"""Streamable HTTP transport: the SDK's app behind an optional bearer-token check."""

from __future__ import annotations

import hmac
import json
import os
import socket

from mcp.server.mcpserver import MCPServer

from shared.logs import uvicorn_log_config


class BearerTokenGate:
    """ASGI middleware: every HTTP request must carry 'Authorization: Bearer <token>'."""

    def __init__(self, app, token: str):
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not self._authorized(scope):
            await _refuse(send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                return hmac.compare_digest(value, self._expected)
        return False


async def _refuse(send) -> None:
    body = json.dumps({"error": "unauthorized",
                       "message": "send the configured token as 'Authorization: Bearer <token>'"}).encode()
    await send({"type": "http.response.start", "status": 401,
                "headers": [(b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="aokun"')]})
    await send({"type": "http.response.body", "body": body})



def serve_http(server: MCPServer, listener: socket.socket, host: str, token: str,
               log_level: str) -> None:
    """Serve MCP at http://host:port/mcp on the listener bind_listener gave, until interrupted.
    `host` as configured: the SDK's DNS-rebinding protection is keyed on it."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
    if token:
        app = BearerTokenGate(app, token)
    config = uvicorn.Config(app, log_level=log_level.lower(), log_config=uvicorn_log_config())
    uvicorn.Server(config).run(sockets=[listener])
