"""Server-Timing on every panel response: how long the server took, for the browser's network
panel and for scripts/bench_panel.py (which reports server time, not loopback round trips)."""

from __future__ import annotations

import time


class ServerTiming:
    """ASGI middleware adding `Server-Timing: app;dur=<ms>`: the time from the request's arrival
    to the start of its response, which for the panel's pages includes the reads and the
    template rendering (Starlette renders a page before it starts sending it)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed(message):
            if message["type"] == "http.response.start":
                ms = (time.perf_counter() - started) * 1000
                message = {**message, "headers": [*message.get("headers", []),
                                                   (b"server-timing", f"app;dur={ms:.1f}".encode())]}
            await send(message)

        await self.app(scope, receive, timed)
