"""How a store's aggregate calls reach a connection, the same on every engine.

The SQL stays in the aggregate modules (documents.py, stages.py, ...), whose functions take a
connection; the aggregates (portable/aggregates.py and each engine's) hand every call to a runner,
which owns the connection question:

- `InTransaction`: inside read() or write(): every call runs on that transaction's
  connection; a read session refuses writes (a deferred SQLite read would quietly upgrade).
- `PerCall`: the Store used directly: each call is a transaction of its own (a read snapshot,
  so a multi-statement read is consistent, or a write transaction), or joins the thread's
  open transaction when there is one: code that holds a transaction and calls the store sees
  its own uncommitted writes.

The driver's errors leave every call as StorageError (the engine's own wording), so a caller
can catch a failed statement inside a transaction without knowing the engine. `Session` is
what both engines' sessions share: the savepoint and whether the transaction still stands.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol, TypeVar

from shared.errors import StorageError
from shared.store.model.record import Record

# What an aggregate module's function returns, handed back as it came.
Result = TypeVar("Result")


class Engine(Protocol):
    """What the runners need of an engine's database (db.Database, postgres PgDatabase)."""

    @property
    def errors(self) -> type[Exception]:
        """The driver's error base class (read-only here, so a subclass such as sqlite3.Error fits)."""
        ...

    def current(self) -> Any | None:
        """The calling thread's open transaction's connection, if any."""
        ...

    def snapshot(self) -> AbstractContextManager[Any]: ...

    def write(self) -> AbstractContextManager[Any]: ...

    def failure(self, exc: Any, outcome: str = "") -> StorageError:
        """exc: an instance of errors (each engine takes its own driver's)."""
        ...

    def records(self, rows: list[Any]) -> list[Record]: ...

    def savepoint(self, conn: Any, name: str) -> AbstractContextManager[Any]: ...

    def transaction_alive(self, conn: Any) -> bool: ...


class Runner:
    """How an aggregate's call reaches a connection (see the module docstring)."""

    writable = True

    def __init__(self, db: Engine):
        self.db = db

    def connection(self) -> Any | None:
        """The open transaction's connection the calls run on, or None."""
        raise NotImplementedError

    def read(self, fn: Callable[..., Result], *args: Any) -> Result:
        raise NotImplementedError

    def write(self, fn: Callable[..., Result], *args: Any) -> Result:
        raise NotImplementedError

    def iterate(self, fn: Callable[..., Iterator[Result]], *args: Any) -> Iterator[Result]:
        raise NotImplementedError

    def whole(self, fn: Callable[[Any], Result]) -> Result:
        """fn(db) for the few functions that take the database (their own snapshot)."""
        raise NotImplementedError

    def rows(self, fn: Callable[..., list[Any]], *args: Any) -> list[Record]:
        return self.db.records(self.read(fn, *args))

    def row(self, fn: Callable[..., Any], *args: Any) -> Record | None:
        found = self.read(fn, *args)
        return None if found is None else self.db.records([found])[0]

    def _call(self, conn: Any, fn: Callable[..., Result], args: tuple[Any, ...]) -> Result:
        try:
            return fn(conn, *args)
        except self.db.errors as exc:
            raise self.db.failure(exc) from exc

    def _iterate(self, conn: Any, fn: Callable[..., Iterator[Result]], args: tuple[Any, ...]) -> Iterator[Result]:
        try:
            yield from fn(conn, *args)
        except self.db.errors as exc:
            raise self.db.failure(exc) from exc


class InTransaction(Runner):
    """Calls inside one read() or write() transaction."""

    def __init__(self, db: Engine, conn: Any, writable: bool):
        super().__init__(db)
        self.conn, self.writable = conn, writable

    def connection(self) -> Any | None:
        return self.conn

    def read(self, fn: Callable[..., Result], *args: Any) -> Result:
        return self._call(self.conn, fn, args)

    def write(self, fn: Callable[..., Result], *args: Any) -> Result:
        if not self.writable:
            raise StorageError("a read session cannot write (use store.write()); nothing was stored")
        return self._call(self.conn, fn, args)

    def iterate(self, fn: Callable[..., Iterator[Result]], *args: Any) -> Iterator[Result]:
        return self._iterate(self.conn, fn, args)

    def whole(self, fn: Callable[[Any], Result]) -> Result:
        return fn(Joined(self.db, self.conn))


class PerCall(Runner):
    """Calls on the Store itself: one transaction each, or the thread's open one."""

    def connection(self) -> Any | None:
        return self.db.current()

    def read(self, fn: Callable[..., Result], *args: Any) -> Result:
        conn = self.db.current()
        if conn is not None:
            return self._call(conn, fn, args)
        with self.db.snapshot() as conn:
            return fn(conn, *args)

    def write(self, fn: Callable[..., Result], *args: Any) -> Result:
        conn = self.db.current()
        if conn is not None:
            return self._call(conn, fn, args)
        with self.db.write() as conn:
            return fn(conn, *args)

    def iterate(self, fn: Callable[..., Iterator[Result]], *args: Any) -> Iterator[Result]:
        conn = self.db.current()
        if conn is not None:
            yield from self._iterate(conn, fn, args)
            return
        with self.db.snapshot() as conn:
            yield from fn(conn, *args)

    def whole(self, fn: Callable[[Any], Result]) -> Result:
        conn = self.db.current()
        return fn(Joined(self.db, conn)) if conn is not None else fn(self.db)


class Joined:
    """A database face on a transaction already open, for functions that take the database
    and open a snapshot of their own (consistency.all_table_counts): they read inside it."""

    def __init__(self, db: Engine, conn: Any):
        self.db, self.conn = db, conn

    @contextmanager
    def snapshot(self) -> Generator[Any, None, None]:
        try:
            yield self.conn
        except self.db.errors as exc:
            raise self.db.failure(exc) from exc


class Session:
    """What every engine's session has beside its aggregates (bound to `run` by the engine)."""

    def __init__(self, run: Runner):
        self._run = run

    @contextmanager
    def savepoint(self, name: str) -> Generator[None, None, None]:
        db, conn = self._run.db, self._run.connection()
        if conn is None or not self._run.writable or not db.transaction_alive(conn):
            raise StorageError("a savepoint needs a write transaction (store.write())")
        try:
            with db.savepoint(conn, name):
                yield
        except db.errors as exc:
            raise db.failure(exc) from exc

    def transaction_alive(self) -> bool:
        conn = self._run.connection()
        return conn is not None and self._run.db.transaction_alive(conn)


SessionT = TypeVar("SessionT", bound=Session)


@contextmanager
def write_session(db: Engine, session: Callable[[Runner], SessionT]) -> Generator[SessionT, None, None]:
    """A write transaction's session. A failed statement inside it leaves as the driver's
    error, so the engine's transaction rolls back and words it with the outcome."""
    with db.write() as conn:
        try:
            yield session(InTransaction(db, conn, writable=True))
        except StorageError as exc:
            if isinstance(exc.__cause__, db.errors):
                raise exc.__cause__  # noqa: B904 - the driver's own error, as it came
            raise
