"""MCP sessions over HTTP, bounded in time and in number per token.

A handshake-era client (one that sends `initialize`) gets a session that the SDK's session
manager keeps (with its server task and streams) until the client DELETEs it or it sits idle:
no request in flight, no stream open, for server.session_idle_timeout_s. Clients that never
DELETE (most do not when killed) would otherwise hold memory for the SDK's default 30 minutes.

A token (the principal it stands for) holds at most server.max_sessions_per_token sessions:
one more is refused in one line (HTTP 429) rather than an older one being closed, so a
client that leaks sessions cannot end the sessions another client of the same token is
using; the refusal says to wait for the idle expiry or DELETE one. A front without tokens
serves every client as the admin: they share one cap. Both keys apply live, the expiry to
sessions opened after the change.

2026-07-28 clients keep no session: nothing here applies to them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Container

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from shared.access import Principal
from shared.live_config import LiveConfig

log = logging.getLogger("aokun.front")

_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode("ascii")
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode("ascii")


class TooManySessions(Exception):
    """A token at its session cap asked for one more (the message is the one-line refusal)."""


class SessionLimits:
    """The sessions each principal holds, and the cap on them.

    The SDK keeps the live sessions (it ends them on DELETE, idle expiry or a crash); this
    remembers which principal opened each, learnt from the Mcp-Session-Id of a successful
    opening response, and forgets those the SDK no longer holds."""

    def __init__(self, manager: StreamableHTTPSessionManager, live: LiveConfig):
        self.manager = manager
        self.live = live
        self._held: dict[Principal, set[str]] = {}
        self._opening: Counter[Principal] = Counter()
        self._live_sessions()  # fails at start, not at the first request, if the SDK changed

    def _live_sessions(self) -> Container[str]:
        # The SDK lists its open sessions nowhere public; this dict is the one it serves from.
        live = getattr(self.manager, "_server_instances", None)
        if not isinstance(live, dict):
            raise RuntimeError("the MCP SDK's session manager no longer keeps its sessions in "
                               "_server_instances: aokun_server/sessions.py needs updating")
        return live

    async def serve(self, principal: Principal, app, scope, receive, send) -> None:
        """Pass the request to app; one that would open a session counts against principal's
        cap, and TooManySessions when it is reached (nothing passed on)."""
        if not _opens_session(scope):
            await app(scope, receive, send)
            return
        settings = self.live.now.server  # this request's: a changed cap applies to the next opening
        held = self._held_by(principal)
        if len(held) + self._opening[principal] >= settings.max_sessions_per_token:
            log.info("refused a new MCP session: %s holds %d", principal.name, len(held))
            raise TooManySessions(
                f"this token already holds {len(held)} open MCP sessions (server.max_sessions_per_token):"
                f" end one (HTTP DELETE with its Mcp-Session-Id) or wait until one has been idle"
                f" for server.session_idle_timeout_s ({settings.session_idle_timeout_s:g} s)")
        # Read by the SDK as it admits the session: the expiry of the settings at its opening.
        self.manager.session_idle_timeout = settings.session_idle_timeout_s
        self._opening[principal] += 1

        async def noting_session(message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers", ()):
                    if name.lower() == _SESSION_HEADER:
                        held.add(value.decode("ascii", "replace"))
            await send(message)

        try:
            await app(scope, receive, noting_session)
        finally:
            self._opening[principal] -= 1
            if not self._opening[principal]:
                del self._opening[principal]
            if not held and principal not in self._opening:
                self._held.pop(principal, None)

    def _held_by(self, principal: Principal) -> set[str]:
        """principal's sessions still open (those the SDK ended are forgotten now)."""
        live = self._live_sessions()
        held = self._held.setdefault(principal, set())
        held.difference_update([session for session in held if session not in live])
        return held


def _opens_session(scope) -> bool:
    """Whether the SDK would open a session for this request: a handshake-era request (no
    protocol version header, or a handshake one) without a session id."""
    version = None
    for name, value in scope.get("headers", ()):
        if name == _SESSION_HEADER:
            return False
        if name == _VERSION_HEADER:
            version = value.decode("latin-1")
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS
