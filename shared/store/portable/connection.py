"""The connection the portable SQL in the aggregate modules runs on, whatever the engine."""

from __future__ import annotations

from typing import Any, Protocol


class Connection(Protocol):
    """What a function whose SQL both engines run needs of its connection: a sqlite3
    connection, or the PostgreSQL store's PgConnection (qmark placeholders, rows read by
    index or by name)."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Any, /) -> Any: ...


class BatchCursor(Protocol):
    """A cursor read a batch of rows at a time: sqlite3's, or a psycopg (server-side) one."""

    def fetchmany(self, size: int, /) -> list[Any]: ...
