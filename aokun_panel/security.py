"""The panel's gate: loopback Host only, a per-start token on every request, and a CSRF token
plus a same-origin Origin on every write.

- Host: a page on another site can make the browser talk to 127.0.0.1 under its own name (DNS
  rebinding); refusing any Host but 127.0.0.1 / localhost stops that.
- Token: printed with the URL at start (as Jupyter does); a browser without it gets a page
  saying how to get the URL (locked.py), scripts get JSON. The first visit brings it as
  ?token=..., which sets an HttpOnly, SameSite=Strict cookie; after that the cookie carries it.
  A ?token= in the URL is checked before the cookie: the URL printed after a restart opens the
  panel although the browser still holds the previous start's cookie (the cookie is replaced).
  A wrong ?token= is refused even beside a valid cookie: what the request names is what is checked.
- Users: besides the per-start token, server.token (the admin) and a user's token (`aokun
  users add`) open the panel; each is looked up on every request (shared/access.py's
  resolve_token, no cache), so a revoked token is refused at its next request. The principal
  found is left in the request's state for the pages (access.py).
- Writes (any method but GET/HEAD): the CSRF token (derived from the access token, sent in a
  form field or the X-CSRF-Token header) and an Origin header naming this panel.
- Bodies: at most max_body_bytes, read here before any page sees them; a larger one is
  refused (413, one line) before anything parses it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool

from aokun_panel import locked
from shared.access import ADMIN
from shared.errors import StorageError
from shared.live_config import LiveConfig

COOKIE = "aokun_panel"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})
SAFE_METHODS = frozenset({"GET", "HEAD"})

# The largest body the panel reads. A settings save sends the keys it changes: a list key at
# its limit (MAX_LIST_CHARS, 100,000 characters, at most 4 bytes each in UTF-8) is 400 KB, so
# 1 MiB holds two with room for every other key. A memory's edit carries its text: up to
# server.max_content_chars characters, which raise the bound with them.
MAX_BODY_BYTES = 1024 * 1024
# A body over the bound is still read (and dropped) up to this much, so that a client that
# sends it all before it reads the answer gets the refusal rather than a reset connection.
DRAIN_BYTES = 64 * 1024 * 1024


def csrf_token(access_token: str) -> str:
    """The CSRF token pages embed: derived from the request's access token, so nothing else is
    kept and one user's pages hold no token another's requests would pass with."""
    return hmac.new(access_token.encode("utf-8", "surrogatepass"), b"aokun-panel-csrf",
                    hashlib.sha256).hexdigest()


def max_body_bytes(max_content_chars: int) -> int:
    """The bound on a request's body: MAX_BODY_BYTES, or a memory's text at its limit (4 bytes
    a character) with 64 KiB for its metadata if that is more."""
    return max(MAX_BODY_BYTES, 4 * max_content_chars + 64 * 1024)


def host_name(host_header: str) -> str:
    """'127.0.0.1:8765' -> '127.0.0.1'; '[::1]:8765' -> '::1'."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0] if ":" in host_header else host_header


class PanelGate:
    """ASGI middleware in front of the whole panel."""

    def __init__(self, app, token: str, port: int, resolve=None, live: LiveConfig | None = None):
        """resolve(token) -> Principal or None: the store's lookup of server.token and users'
        tokens (None: only the per-start token opens the panel). `live`: the running config,
        whose server.max_content_chars bounds each request's body (None: MAX_BODY_BYTES)."""
        self.app = app
        self.token = token
        self.resolve = resolve
        self.live = live
        self.origins = {f"http://{host}:{port}" for host in LOCAL_HOSTS}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        # The URL's token first: after a restart the browser still sends the old start's cookie.
        given = query.get("token", [""])[0] or self._cookie(headers) or headers.get("x-aokun-token", "")
        local = host_name(headers.get("host", "")) in LOCAL_HOSTS
        try:
            principal = await self._principal(given) if local else None  # no lookup for a foreign Host
        except StorageError as exc:  # the store cannot say whose token this is: nobody's, for now
            await _send(send, 503, str(exc))
            return
        refusal = self._refusal(scope, headers, given, principal)
        if refusal is not None:
            if refusal[0] == 401 and locked.wants_html(scope.get("path", ""), headers):
                await _send_html(send, 401, locked.page(headers))
            else:
                await _send(send, *refusal)
            return
        if scope["method"] not in SAFE_METHODS:
            limit = self._body_limit()
            body = await _read_body(receive, limit)
            if body is None:
                await _send(send, 413, _too_large(headers, limit))
                return
            receive = _replay(body, receive)
        state = scope.setdefault("state", {})
        state["principal"], state["csrf"] = principal, csrf_token(given)
        if query.get("token", [""])[0] == given and self._cookie(headers) != given:
            await self.app(scope, receive, _setting_cookie(send, given))
            return
        await self.app(scope, receive, send)

    def _body_limit(self) -> int:
        """The largest body taken now."""
        if self.live is None:
            return MAX_BODY_BYTES
        return max_body_bytes(self.live.now.server.max_content_chars)

    async def _principal(self, given: str):
        """Who the token stands for, None for no one."""
        if hmac.compare_digest(given.encode("utf-8", "surrogatepass"), self.token.encode()):
            return ADMIN
        if not given or self.resolve is None:
            return None
        return await run_in_threadpool(self.resolve, given)

    def _refusal(self, scope, headers: dict, given: str, principal) -> tuple[int, str] | None:
        if host_name(headers.get("host", "")) not in LOCAL_HOSTS:
            return 403, "this panel answers only to 127.0.0.1 or localhost (Host header refused)"
        if principal is None:
            return 401, ("open the panel with the URL `aokun panel` (or `aokun run`, scripts/run) printed,"
                         " or with ?token= and your user token: this one is missing, wrong or revoked")
        if scope["method"] not in SAFE_METHODS:
            if headers.get("origin") not in self.origins:
                return 403, "cross-origin write refused: the Origin header must be this panel"
            if not hmac.compare_digest(headers.get("x-csrf-token", "").encode(), csrf_token(given).encode()):
                return 403, "missing or wrong CSRF token: reload the page and try again"
        return None

    @staticmethod
    def _cookie(headers: dict) -> str:
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no token
            return ""
        return cookie[COOKIE].value if COOKIE in cookie else ""


async def _read_body(receive, limit: int) -> list[dict] | None:
    """The request's body messages, or None when they hold more than `limit` bytes (the rest
    then read and dropped, up to DRAIN_BYTES)."""
    messages, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: the page hears of it
            return [*messages, message] if size <= limit else None
        size += len(message.get("body", b""))
        if size <= limit:
            messages.append(message)
        elif size > DRAIN_BYTES:
            return None
        if not message.get("more_body", False):
            return messages if size <= limit else None


def _replay(messages: list[dict], receive):
    """A receive() that gives the body read already, then whatever comes next."""
    async def replayed():
        return messages.pop(0) if messages else await receive()
    return replayed


def _too_large(headers: dict, limit: int) -> str:
    declared = headers.get("content-length", "")
    size = f" ({_megabytes(int(declared))})" if declared.isdigit() else ""
    return f"request body too large{size}: the panel takes at most {_megabytes(limit)}"


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def _setting_cookie(send, token: str):
    async def wrapped(message):
        if message["type"] == "http.response.start":
            value = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
            message = {**message, "headers": [*message.get("headers", []),
                                              (b"set-cookie", value.encode("latin-1"))]}
        await send(message)
    return wrapped


async def _send(send, status: int, text: str) -> None:
    body = json.dumps({"error": text}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


async def _send_html(send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/html; charset=utf-8")]})
    await send({"type": "http.response.body", "body": body})
