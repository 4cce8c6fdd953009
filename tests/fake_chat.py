"""A real HTTP server on loopback that speaks the OpenAI chat completions API, for tests.

Replies are scripted: each request takes the next reply from `script` (then `always`, if set):
a memory as JSON, any text (invalid JSON), an HTTP error (429 with Retry-After, 500, 401...),
or any of these after a delay. With json_schema=False it refuses response_format json_schema
with HTTP 400 as DeepSeek does, without using up a scripted reply. Every request is recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# How often serve_forever looks for shutdown(): the time a test waits for this server to stop.
SHUTDOWN_POLL_S = 0.02

PROMPT_TOKENS = 120
COMPLETION_TOKENS = 30


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict
    headers: dict = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict
    body: dict
    time: float  # time.monotonic() when it arrived


def text_reply(content: str, delay_s: float = 0.0, prompt_tokens: int = PROMPT_TOKENS,
               completion_tokens: int = COMPLETION_TOKENS) -> Reply:
    """HTTP 200 with `content` as the assistant's message."""
    return Reply(200, {"id": "chatcmpl-fake", "object": "chat.completion", "model": "fake",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                 "total_tokens": prompt_tokens + completion_tokens}}, delay_s=delay_s)


def memory_reply(fields: dict, **kwargs) -> Reply:
    """HTTP 200 with `fields` as a JSON object in the assistant's message."""
    return text_reply(json.dumps(fields, ensure_ascii=False), **kwargs)


def error_reply(status: int, message: str, retry_after: str | None = None) -> Reply:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Reply(status, {"error": {"message": message, "type": "fake_error"}}, headers)


class FakeChatServer:
    def __init__(self, *script: Reply, always: Reply | None = None, json_schema: bool = True):
        self.script = deque(script)
        self.always = always
        self.json_schema = json_schema
        self.requests: list[Request] = []
        self._closing = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(Request(self.path, dict(self.headers), body, time.monotonic()))
                self._send(server.next_reply(self.path, body))

            def _send(self, reply: Reply):
                if reply.delay_s and server._closing.wait(reply.delay_s):
                    return
                raw = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    for name, value in {"Content-Type": "application/json", **reply.headers}.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout test)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True)

    def next_reply(self, path: str, body: dict) -> Reply:
        if not path.endswith("/chat/completions"):
            return error_reply(404, f"no route {path}")
        if not self.json_schema and body.get("response_format", {}).get("type") == "json_schema":
            return error_reply(400, "This response_format type is unavailable now")
        if self.script:
            return self.script.popleft()
        if self.always is not None:
            return self.always
        return error_reply(500, "fake chat server: no reply scripted for this request")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()


class TrickleServer:
    """A real HTTP server on loopback that answers any POST one byte a second, forever (until
    closed): mode "body" sends the status line and headers at once (Content-Length: 1 MB) and
    then trickles the body; mode "headers" trickles from the status line on, its headers never
    ending. Any per-read timeout longer than a second is never reached. Each request is counted."""

    def __init__(self, mode: str = "body", interval_s: float = 1.0):
        if mode not in ("body", "headers"):
            raise ValueError(f"mode must be body or headers, not {mode!r}")
        self.mode = mode
        self.interval_s = interval_s
        self.requests = 0
        self.bytes_sent = 0
        self._closing = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests += 1
                if server.mode == "body":
                    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            b"Content-Length: 1000000\r\n\r\n")
                    self._write(head)
                    self._trickle(b'{"choices": [' + b" " * 999986 + b"]}")
                else:
                    self._trickle(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Trickle: "
                                  + b"a" * 1000000)
                self.close_connection = True

            def _trickle(self, data: bytes):
                for i in range(len(data)):
                    if not self._write(data[i:i + 1]) or server._closing.wait(server.interval_s):
                        return

            def _write(self, data: bytes) -> bool:
                try:
                    self.wfile.write(data)
                    self.wfile.flush()
                except OSError:
                    return False  # the client gave up
                server.bytes_sent += len(data)
                return True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
