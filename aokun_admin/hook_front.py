"""`aokun hook`'s client of a running HTTP front: just enough streamable-HTTP MCP for one
recall, over urllib (the official MCP client would cost ~0.4 s of imports in a process that
lives for one call). Standard library only at import time: a hook runs before every prompt.

A front that answers is the last word on the caller's token and scope: a refusal (HTTP 401 or
403, a JSON-RPC error, a tool error such as a persona the token may not use) is FrontRefused,
and the hook then prints nothing; a front it cannot reach, or that fails as a server (5xx), is
FrontUnreachable, and the hook then reads the store itself, within the same scope.
"""

from __future__ import annotations

import argparse
import json

FRONT_TIMEOUT_S = 10.0
PROTOCOL_VERSION = "2025-06-18"


class HookError(Exception):
    """Anything that stops the hook; reported as one line on stderr, exit status 0."""


class FrontRefused(HookError):
    """The front answered, and refused: nothing is to be read elsewhere instead."""


class FrontUnreachable(HookError):
    """No front answered at the endpoint (gone, not listening, failing as a server)."""


class _Document:
    """What answer.line reads of a recalled memory, from a front's structured result."""

    def __init__(self, result: dict):
        self.id = result["id"]
        self.text = result["text"]
        self.fields = argparse.Namespace(persona_summary=result.get("persona_summary"))


class _Hit:
    def __init__(self, result: dict):
        self.document = _Document(result)
        self.score = float(result["score"])
        self.duplicates = tuple(result.get("duplicates") or ())


class FrontClient:
    """Just enough streamable-HTTP MCP for one tool call: initialize, initialized, the call,
    and the session's DELETE, each a POST over urllib (JSON or an SSE stream in reply)."""

    def __init__(self, url: str, token: str | None, timeout: float = FRONT_TIMEOUT_S):
        self.url, self.token, self.timeout = url, token, timeout
        self.session: str | None = None
        self._id = 0

    def recall(self, query: str, k: int, persona: str | None, min_score: float | None,
               max_chars: int) -> list[_Hit]:
        """The front's recall; without min_score, the front's configured floors apply."""
        arguments = {"query": query, "k": k, "max_chars": max_chars}
        if min_score is not None:
            arguments["min_score"] = min_score
        if persona is not None:
            arguments["persona_id"] = persona
        self._request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                     "clientInfo": {"name": "aokun-hook", "version": "1"}})
        try:
            self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            result = self._request("tools/call", {"name": "recall", "arguments": arguments})
            if result.get("isError"):
                raise FrontRefused(f"the front's recall refused: {_tool_text(result)}")
            structured = result.get("structuredContent") or {}
            return [_Hit(r) for r in structured.get("results", [])]
        finally:
            self._close()

    def _request(self, method: str, params: dict) -> dict:
        self._id += 1
        reply = self._post({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        if not isinstance(reply, dict):
            raise FrontUnreachable(f"{method}: no JSON-RPC reply from the front at {self.url}")
        if "error" in reply:
            raise FrontRefused(f"{method}: {reply['error'].get('message', reply['error'])}")
        return reply.get("result") or {}

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.session:
            headers["mcp-session-id"] = self.session
            headers["mcp-protocol-version"] = PROTOCOL_VERSION
        return headers

    def _post(self, message: dict):
        import urllib.error
        import urllib.request

        request = urllib.request.Request(self.url, data=json.dumps(message).encode(),
                                         headers=self._headers(), method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                self.session = response.headers.get("mcp-session-id") or self.session
                raw = response.read()
                kind = response.headers.get("content-type", "")
        except urllib.error.HTTPError as exc:
            said = f"HTTP {exc.code} from the front at {self.url}{_said(exc)}"
            if exc.code >= 500 or exc.code == 404:  # failing, or not a front at this path
                raise FrontUnreachable(said) from None
            raise FrontRefused(said) from None
        except (urllib.error.URLError, OSError) as exc:
            raise FrontUnreachable(f"cannot reach the front at {self.url}: {getattr(exc, 'reason', exc)}") from None
        try:
            body = raw.decode("utf-8")
            if "id" not in message or not body.strip():
                return None
            if kind.startswith("text/event-stream"):
                return _sse_reply(body, message["id"])
            return json.loads(body)
        except ValueError:  # undecodable, or not JSON: no front of ours answered
            raise FrontUnreachable(f"no JSON-RPC answer from {self.url}") from None

    def _close(self) -> None:
        """End the session so that a front does not keep one per prompt."""
        if not self.session:
            return
        import urllib.request

        request = urllib.request.Request(self.url, headers=self._headers(), method="DELETE")
        try:
            urllib.request.urlopen(request, timeout=self.timeout).close()
        except Exception:  # the answer is in hand; the front expires sessions
            pass


def _sse_reply(body: str, message_id: int):
    """The JSON-RPC reply to message_id in a server-sent event stream."""
    for event in body.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in event.split("\n") if line.startswith("data:"))
        if data:
            reply = json.loads(data)
            if isinstance(reply, dict) and reply.get("id") == message_id:
                return reply
    return None


def _tool_text(result: dict) -> str:
    for block in result.get("content") or ():
        if block.get("type") == "text":
            return " ".join(block.get("text", "").split())[:300]
    return "no message"


def _said(exc) -> str:
    """What a refusing front said in its JSON body ({"message": ...}), as ": message"."""
    try:
        message = json.loads(exc.read().decode("utf-8")).get("message")
    except Exception:  # no body, or not ours: the status says enough
        return ""
    return f": {' '.join(str(message).split())[:300]}" if message else ""
