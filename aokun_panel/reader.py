"""Reads for the panel, off the event loop: store reads run in a worker thread.

The panel reads through the store's interface like every other entry point. A slow query must
never block the event loop, so each read runs in Starlette's thread pool, inside one read
session (`store.read()`, one consistent snapshot) so that the several queries of a page see
one state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from shared.store.interface import Store


class Reader:
    """Runs store reads for page handlers without blocking the event loop."""

    def __init__(self, store: Store):
        self.store = store

    async def run(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """fn(session, *args) in a worker thread, on one read session."""
        return await run_in_threadpool(self._read, fn, args, kwargs)

    def _read(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        with self.store.read() as s:
            return fn(s, *args, **kwargs)
