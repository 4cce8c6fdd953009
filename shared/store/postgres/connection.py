"""PostgreSQL access: a connection pool, transactions with the SQLite store's guarantees,
errors that say what to do, and the connection face the aggregate modules' SQL runs on.

Writes are serialized like SQLite's: every write transaction first takes one transaction-
level advisory lock (waiting up to storage.busy_timeout_ms), so a read-then-write inside a
write sees no other writer's commits meanwhile (stage leases, periodic claims, upserts keep
their single-writer reasoning). Reads run in REPEATABLE READ READ ONLY snapshots and never
wait for writers. A write holds the lock for its few statements only.

The portable SQL (shared/store/portable/documents.py, stages.py, ...) is written with qmark
placeholders for sqlite3; `PgConnection.execute` hands the same statements to psycopg with
its %s placeholders, so the portable SQL is written once. Statements SQLite spells its own
way (FTS5, json_each, rowid, INSERT OR IGNORE) have PostgreSQL versions in this package.

A restarted server is used on the next request. A connection is checked before it is lent;
one a restart broke sends every idle one through the pool's check at once, so the broken ones
are replaced together. The pool never backs off between reconnection attempts (its own backoff
grows to minutes): each loan that finds no connection makes it connect again. A wait for a
connection is cut in short slices, and after an empty slice one direct connection attempt
tells a server that is away (the request is refused at once, in libpq's words) from a pool
that is busy or still reconnecting (the wait goes on).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import lru_cache
from typing import Any, Protocol, overload
from urllib.parse import urlsplit

import psycopg
import psycopg.sql
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from shared.errors import StorageError
from shared.store.model.record import Record

# The advisory lock every write transaction takes (any constant unlikely to be another
# application's: "aokun" in ASCII).
WRITE_LOCK = 0x616F6B756E

# How long a loan waits for the pool before asking the server directly whether it is there.
WAIT_SLICE_S = 0.5
# What a server at max_connections answers a new connection (SQLSTATE 53300, which libpq
# reports only in the text): it is up, so a loan waits for one of the pool's connections.
_NO_SLOT_LEFT = ("too many clients", "remaining connection slots are reserved")


def _records(cursor: psycopg.Cursor):
    """psycopg row factory: rows as the interface's Records."""
    if cursor.description is None:
        return tuple
    return Record.kind(tuple(column.name for column in cursor.description))


@lru_cache(maxsize=2048)
def to_pyformat(statement: str) -> str:
    """A qmark statement with psycopg's placeholders: each ? outside quotes becomes %s and
    every literal % is doubled."""
    out: list[str] = []
    quote: str | None = None
    for char in statement:
        if quote:
            if char == quote:
                quote = None
            out.append("%%" if char == "%" else char)
        elif char in ("'", '"'):
            quote = char
            out.append(char)
        elif char == "?":
            out.append("%s")
        elif char == "%":
            out.append("%%")
        else:
            out.append(char)
    return "".join(out)


@overload
def _values(params: Sequence[Any]) -> list[Any]: ...
@overload
def _values(params: None) -> None: ...
def _values(params: Sequence[Any] | None) -> list[Any] | None:
    """SQLite stores booleans as 0/1 in INTEGER columns; so do our PostgreSQL tables."""
    if params is None:
        return None
    return [int(p) if isinstance(p, bool) else p for p in params]


class Rows(Protocol):
    """A statement's cursor as the aggregate modules read it, as they read sqlite3's: rows
    are Records, and a statement that always yields a row (a COUNT, INSERT ... RETURNING) is
    read with fetchone()[0]."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Record]: ...

    def __iter__(self) -> Iterator[Record]: ...


class PgConnection:
    """The face of one psycopg connection the aggregate modules use: execute / executemany
    with qmark placeholders, rows as Records. `raw` is the psycopg connection (for SQL
    written for PostgreSQL, with %s placeholders)."""

    def __init__(self, raw: psycopg.Connection[Any]):  # rows come as Records (_records)
        self.raw = raw

    def execute(self, statement: str, params: Sequence[Any] | None = None) -> Rows:
        # psycopg's stubs ask for a LiteralString; ours is the module's literal SQL, rewritten.
        return self.raw.execute(to_pyformat(statement), _values(params))  # pyright: ignore[reportArgumentType]

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> Rows:
        cursor = self.raw.cursor()
        cursor.executemany(to_pyformat(statement), [_values(r) for r in rows])  # pyright: ignore[reportArgumentType] - as in execute
        return cursor

    def sql(self, statement: str | psycopg.sql.Composable,
            params: Sequence[Any] | Mapping[str, Any] | None = None) -> Rows:
        """A statement written for psycopg (%s placeholders, or psycopg.sql composed)."""
        # psycopg's stubs ask for a LiteralString, SQL or Composed; ours is the modules' own SQL.
        return self.raw.execute(statement, params)  # pyright: ignore[reportArgumentType]

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status in (psycopg.pq.TransactionStatus.INTRANS,
                                                    psycopg.pq.TransactionStatus.INERROR)

    @property
    def failed(self) -> bool:
        return self.raw.info.transaction_status == psycopg.pq.TransactionStatus.INERROR


def persona_is(column: str, persona_id: str | None) -> tuple[str, list[str]]:
    """SQLite's `column IS ?`: IS NULL for no persona, = otherwise (which, unlike IS NOT
    DISTINCT FROM, PostgreSQL can answer from an index)."""
    if persona_id is None:
        return f"{column} IS NULL", []
    return f"{column} = %s", [persona_id]


def where(url: str) -> str:
    """host:port/database of a URL, without user or password (for messages)."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    return f"{host}:{parts.port or 5432}{parts.path or '/'}"


class PgDatabase:
    """One PostgreSQL database shared by every process; a pool of connections, and the
    thread's open transaction (a call on the store joins it). It is the runners' Engine
    (shared/store/runners.py)."""

    errors = psycopg.Error

    def __init__(self, url: str, password: str = "", pool_size: int = 8, busy_timeout_ms: int = 10_000):
        self.url, self.location, self.password = url, where(url), password
        self._busy_timeout_ms = busy_timeout_ms
        kwargs: dict[str, Any] = {"autocommit": True, "row_factory": _records,
                                  "application_name": "aokun"}
        if password:
            kwargs["password"] = password
        # reconnect_timeout=0: a failed attempt is given up at once rather than retried after
        # a growing delay, during which a server that is back again would not be used; the
        # next loan connects again (_connection).
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url, min_size=1, max_size=pool_size, kwargs=kwargs, open=False, reconnect_timeout=0, name="aokun")
        self._opened = False
        self._open_lock = threading.Lock()
        self._local = threading.local()

    # -- connections --------------------------------------------------------------------

    def _open(self) -> None:
        with self._open_lock:
            if not self._opened:
                self._pool.open(wait=False)
                self._opened = True

    @contextmanager
    def _lend(self, outcome: str) -> Generator[PgConnection, None, None]:
        self._open()
        raw = self._connection(outcome)
        try:
            yield PgConnection(raw)
        finally:
            self._pool.putconn(raw)

    def _connection(self, outcome: str) -> psycopg.Connection[Any]:
        """A checked connection from the pool, waiting up to storage.busy_timeout_ms (at least
        1 s) while the pool is busy; a server that is away refuses the loan after one slice."""
        wait = max(self._busy_timeout_ms / 1000, 1.0)
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            try:
                raw = self._pool.getconn(timeout=max(min(WAIT_SLICE_S, left), 0.001))
            except PoolTimeout as exc:
                if time.monotonic() >= deadline:
                    raise StorageError(f"cannot reach the PostgreSQL database {self.location} within "
                                       f"{wait:g} s: check that the server runs and storage.url"
                                       f"{'; ' + outcome if outcome else ''}", kind="cannot_open") from exc
                self._reach(deadline, outcome)
                continue
            try:
                ConnectionPool.check_connection(raw)
            except psycopg.Error:
                # Broken (a restart, a dropped link): the pool replaces it, and every idle one
                # is checked now rather than each at its own next loan.
                self._pool.putconn(raw)
                self._pool.check()
                continue
            except BaseException:
                self._pool.putconn(raw)
                raise
            return raw

    def _reach(self, deadline: float, outcome: str) -> None:
        """One direct connection, closed at once: StorageError (libpq's own words) when the
        server does not take it, the pool alone would only time out."""
        timeout = max(2, math.ceil(deadline - time.monotonic()))  # libpq's least is 2 s
        try:
            extra: dict[str, Any] = {"password": self.password} if self.password else {}
            psycopg.connect(self.url, connect_timeout=timeout, **extra).close()
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            if any(words in first for words in _NO_SLOT_LEFT):
                return  # the server is there, its connections all taken: the wait goes on
            raise StorageError(f"cannot reach the PostgreSQL database {self.location} ({first}): "
                               f"check that the server runs and storage.url"
                               f"{'; ' + outcome if outcome else ''}", kind="cannot_open") from exc

    def current(self) -> PgConnection | None:
        """The calling thread's open transaction, if any."""
        return getattr(self._local, "conn", None)

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def write(self) -> Generator[PgConnection, None, None]:
        """A write transaction holding the write lock: COMMIT on success, ROLLBACK on error.
        psycopg errors leave as StorageError; a failed COMMIT never passes for success."""
        # One round trip: the three statements go as one simple query.
        begin = (f"BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = {int(self._busy_timeout_ms)};"
                 f" SELECT pg_advisory_xact_lock({WRITE_LOCK})")
        with self._transaction(begin, "nothing was stored") as conn:
            yield conn

    @contextmanager
    def snapshot(self) -> Generator[PgConnection, None, None]:
        """A read transaction: several SELECTs that see one consistent state."""
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "") as conn:
            yield conn

    @contextmanager
    def _transaction(self, begin: str, outcome: str) -> Generator[PgConnection, None, None]:
        if self.current() is not None:
            raise StorageError("a transaction is already open on this thread (use the session "
                               "you have); nothing was stored")
        with self._lend(outcome) as conn:
            try:
                conn.sql(begin)
            except psycopg.Error as exc:
                self._rollback(conn)  # a lock wait that timed out leaves the transaction open
                raise self.failure(exc, outcome) from exc
            self._local.conn = conn
            try:
                yield conn
            except BaseException as exc:
                self._local.conn = None
                self._rollback(conn)
                if isinstance(exc, psycopg.Error):
                    raise self.failure(exc, outcome) from exc
                raise
            self._local.conn = None
            try:
                conn.sql("COMMIT")
            except psycopg.Error as exc:
                self._rollback(conn)
                # A connection lost during COMMIT may or may not have committed.
                lost = isinstance(exc, psycopg.OperationalError)
                raise self.failure(exc, "it may not have been stored" if lost and outcome else outcome) from exc

    @staticmethod
    @contextmanager
    def savepoint(conn: PgConnection, name: str) -> Generator[PgConnection, None, None]:
        """A nested transaction inside the caller's: released on success, rolled back (and the
        error passed on) on failure, leaving the outer transaction going."""
        conn.sql(f"SAVEPOINT {name}")
        try:
            yield conn
        except BaseException:
            try:
                conn.sql(f"ROLLBACK TO SAVEPOINT {name}")
                conn.sql(f"RELEASE SAVEPOINT {name}")
            except psycopg.Error:
                pass  # the transaction is lost: transaction_alive() says so
            raise
        conn.sql(f"RELEASE SAVEPOINT {name}")

    @staticmethod
    def transaction_alive(conn: PgConnection) -> bool:
        return conn.in_transaction and not conn.failed

    @staticmethod
    def records(rows: list[Any]) -> list[Record]:
        return list(rows)  # the row factory made them Records already

    def _rollback(self, conn: PgConnection) -> None:
        try:
            if conn.in_transaction:
                conn.sql("ROLLBACK")
        except psycopg.Error:
            pass  # a broken connection: the pool's check replaces it before its next loan

    def autocommit(self) -> AbstractContextManager[PgConnection]:
        """A connection outside any transaction (VACUUM, DDL of tools)."""
        return self._lend("")

    # -- errors -------------------------------------------------------------------------

    def failure(self, exc: psycopg.Error, outcome: str = "") -> StorageError:
        """One line saying what happened to the database and what to do about it."""
        tail = f"; {outcome}" if outcome else ""
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if isinstance(exc, (pg_errors.DiskFull, pg_errors.OutOfMemory)):
            return StorageError(f"the PostgreSQL server {self.location} is out of space ({first}): "
                                f"free space and retry{tail}", kind="full")
        if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
            return StorageError(f"the PostgreSQL database {self.location} is read-only ({first}): "
                                f"point storage.url at the primary{tail}", kind="read_only")
        if isinstance(exc, (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected,
                            pg_errors.SerializationFailure, pg_errors.QueryCanceled)):
            return StorageError("the database stayed locked by another process for longer than "
                                f"storage.busy_timeout_ms ({self._busy_timeout_ms} ms); retry{tail}",
                                kind="locked")
        if isinstance(exc, (pg_errors.DataCorrupted, pg_errors.IndexCorrupted)):
            return StorageError(f"the PostgreSQL database {self.location} reports damage ({first}): "
                                f"run `aokun doctor`{tail}", kind="corrupt")
        if isinstance(exc, psycopg.OperationalError):
            return StorageError(f"lost the PostgreSQL database {self.location} ({first}): check that "
                                f"the server runs and retry{tail}", kind="cannot_open")
        return StorageError(f"database error on {self.location}: {first}{tail}")

    def close(self) -> None:
        with self._open_lock:
            if self._opened:
                self._pool.close()
                self._opened = False
