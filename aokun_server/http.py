"""Streamable HTTP transport: the SDK's app behind a gate that finds who each request is."""

from __future__ import annotations

import json
import logging
import socket

import anyio
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST

from aokun_server.identity import Identity, requested_by
from aokun_server.sessions import SessionLimits, TooManySessions
from shared.errors import AccessDenied, StorageError
from shared.logs import RateLimitedWarnings, uvicorn_log_config

log = logging.getLogger("aokun.front")


class TokenGate:
    """ASGI middleware: every HTTP request is served as the principal of its
    'Authorization: Bearer <token>' (server.token: the admin; a user's token: that user), or
    refused with 401 saying why (no token, a revoked one, one not valid here). Checked on
    every request, so a token revoked meanwhile is refused at once, also on a session opened
    before. A request that would open an MCP session counts against its token's cap
    (sessions.py). While the store cannot be reached every request is refused with 503, and
    the log says so once a minute."""

    def __init__(self, app, identity: Identity, sessions: SessionLimits):
        self.app = app
        self.identity = identity
        self.sessions = sessions
        self.outage = RateLimitedWarnings(log)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            # A store read: off the event loop, as every other one.
            principal = await anyio.to_thread.run_sync(self.identity.of_request, _authorization(scope))
        except StorageError as exc:
            self.outage.warning(str(exc), "could not check a request's token: %s", exc)
            await _answer(send, 503, INTERNAL_ERROR, f"the token could not be checked: {exc}")
            return
        except AccessDenied as exc:
            self.outage.clear()
            await _answer(send, 401, INVALID_REQUEST, str(exc))
            return
        self.outage.clear()
        with requested_by(principal):
            try:
                await self.sessions.serve(principal, self.app, scope, receive, send)
            except TooManySessions as exc:
                await _answer(send, 429, INVALID_REQUEST, str(exc))


def _authorization(scope) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return value
    return None


async def _answer(send, status: int, code: int, message: str) -> None:
    """A refusal as a JSON-RPC error without an id (as the SDK's own refusals are), so an MCP
    client shows its one line rather than only the status."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json")]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="aokun"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve_http(front, listener: socket.socket, host: str) -> None:
    """Serve front's MCP at http://host:port/mcp on the listener bind_listener gave, until
    interrupted. `host` as configured: the SDK's DNS-rebinding protection is keyed on it."""
    import uvicorn

    live = front.live
    app = front.server.streamable_http_app(streamable_http_path="/mcp", host=host,
                                           session_idle_timeout=live.now.server.session_idle_timeout_s)
    sessions = SessionLimits(front.server.session_manager, live)
    front.identity.gated = True  # from now on a call must come with its request's principal
    config = uvicorn.Config(app=TokenGate(app, front.identity, sessions),
                            log_level=live.now.server.log_level.lower(),
                            log_config=uvicorn_log_config())
    uvicorn.Server(config).run(sockets=[listener])
