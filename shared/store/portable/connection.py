"""The connection the portable SQL in the aggregate modules runs on, whatever the engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol


class Rows(Protocol):
    """A statement's cursor as the portable SQL reads it: sqlite3's, or the PostgreSQL
    store's. A row is a sqlite3.Row or a Record, read by index or by name either way, so it
    stays Any here."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """What a function whose SQL both engines run needs of its connection: a sqlite3
    connection, or the PostgreSQL store's PgConnection (qmark placeholders, rows read by
    index or by name)."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Rows: ...

    def executemany(self, sql: str, parameters: Any, /) -> Rows: ...


class BatchCursor(Protocol):
    """A cursor read a batch of rows at a time: sqlite3's, or a psycopg (server-side) one."""

    def fetchmany(self, size: int, /) -> list[Any]: ...
