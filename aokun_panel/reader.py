"""Reads for the panel, off the event loop: store reads run in a worker thread.

The panel reads through the store layer like every other entry point. A slow query must never
block the event loop, so each read runs in Starlette's thread pool on that thread's own
connection (shared/store/db.py gives every thread one), inside one read snapshot so that the
several queries of a page see one state.
"""

from __future__ import annotations

from typing import Any, Callable

from starlette.concurrency import run_in_threadpool

from shared.store.db import Database


class Reader:
    """Runs store reads for page handlers without blocking the event loop."""

    def __init__(self, db: Database):
        self.db = db

    async def run(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """fn(conn, *args) in a worker thread, on one read snapshot."""
        return await run_in_threadpool(self._read, fn, args, kwargs)

    async def with_db(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """fn(db, *args) in a worker thread (for readers such as DocumentStore that take one)."""
        return await run_in_threadpool(fn, self.db, *args, **kwargs)

    def _read(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        with self.db.snapshot() as conn:
            return fn(conn, *args, **kwargs)
