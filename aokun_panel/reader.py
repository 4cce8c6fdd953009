"""Reads for the panel, off the event loop: store functions run on aiosqlite's thread.

The panel reads through the store layer like every other entry point. aiosqlite keeps one
sqlite3 connection on a thread of its own and runs calls there, so a slow query never blocks
the event loop; the store's read functions are handed that connection, on that thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from shared.store import fts


class _ThreadDatabase:
    """What DocumentStore-style readers expect of a Database: connection() and snapshot(),
    here the aiosqlite thread's own connection (only ever used on that thread)."""

    def __init__(self, conn, path: Path):
        self._conn = conn
        self.path = path

    def connection(self):
        return self._conn

    def snapshot(self):
        from contextlib import contextmanager

        @contextmanager
        def read():
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")
        return read()


class Reader:
    """One aiosqlite connection (read-only use) to the store's database."""

    def __init__(self, path: Path, busy_timeout_ms: int):
        self.path = Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._conn = None

    async def open(self) -> None:
        import aiosqlite
        import sqlite3

        self._conn = await aiosqlite.connect(self.path, isolation_level=None,
                                             timeout=self.busy_timeout_ms / 1000)
        self._conn.row_factory = sqlite3.Row
        await self._conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        await self.run(lambda conn: fts.configure_connection(conn))

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def run(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """fn(conn, *args) on aiosqlite's thread, with its sqlite3 connection."""
        # aiosqlite's _execute is how its own methods reach the connection on its thread; it
        # has kept this shape since 0.17 (the version range in pyproject.toml).
        raw = self._conn._conn
        return await self._conn._execute(fn, raw, *args, **kwargs)

    async def with_db(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """fn(db, *args) where db looks like a Database on aiosqlite's thread (for readers
        such as DocumentStore that take one)."""
        return await self.run(lambda conn: fn(_ThreadDatabase(conn, self.path), *args, **kwargs))
