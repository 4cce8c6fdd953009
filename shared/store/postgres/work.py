"""The stage journal, vectors and meta on PostgreSQL: the portable aggregates
(shared/store/portable/aggregates.py) with PostgreSQL versions of the methods whose SQL is
each engine's own — id lists are arrays instead of json_each, the change-sequence reads need
no INDEXED BY, whole vector spaces stream through a server-side cursor, and the store id is
one a DOUBLE PRECISION meta value holds exactly. Heartbeats and usage need nothing of
their own (portable/runtime.py, portable/usage.py).

The change sequence stays the meta row 'vector_seq' (not a PostgreSQL SEQUENCE): it is taken
under the write lock (connection.py), so numbers are handed out in commit order and a front
on any host that has read up to N never later finds a smaller number committed.

The functions take a PgConnection (connection.py): `sql` for statements written for
PostgreSQL with %s placeholders.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from shared.store.portable import meta, vectors
from shared.store.portable.aggregates import (
    PortableStages,
    PortableVectors,
)
from shared.store.portable.bookkeeping import PortableMeta
from shared.store.postgres.connection import PgConnection

# -- stages --------------------------------------------------------------------------------


def done_among(conn: PgConnection, memory_ids: Sequence[int], stage: str) -> set[int]:
    """As stages.done_among, the ids as an array."""
    if not memory_ids:
        return set()
    return {r[0] for r in conn.sql(
        "SELECT s.memory_id FROM memory_stages s JOIN documents d ON d.id = s.memory_id"
        " WHERE s.memory_id = ANY(%s) AND s.stage = %s AND s.status = 'done'"
        " AND s.content_hash = d.content_hash", (list(memory_ids), stage))}


class PostgresStages(PortableStages):
    def done_among(self, memory_ids: Sequence[int], stage: str) -> set[int]:
        return self._run.read(done_among, memory_ids, stage)


# -- vectors -------------------------------------------------------------------------------

_cursor_names = itertools.count()


def _streamed(conn: PgConnection, statement: str, params: Sequence[Any], dim: int,
              batch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(ids, matrix) batches of (owner_id, vector) rows read through a server-side cursor:
    a whole space (100k vectors and more) never sits in this process's memory at once, and
    the cursor reads the one snapshot it was declared in while the caller consumes it.
    bytea comes back as bytes (or a memoryview): vectors.batches joins either for numpy."""
    with conn.raw.cursor(name=f"aokun_vectors_{next(_cursor_names)}") as cursor:
        # psycopg's stubs want a LiteralString; this SQL is put together from our own constants.
        cursor.execute(statement, params)  # pyright: ignore[reportArgumentType]
        yield from vectors.batches(cursor, dim, batch)


def iter_space(conn: PgConnection, kind: str, model: str, dim: int,
               batch: int = 5000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    return _streamed(conn, "SELECT owner_id, vector FROM vectors WHERE kind = %s AND model = %s"
                     " AND dim = %s", (kind, model, dim), dim, batch)


def iter_changes(conn: PgConnection, kind: str, model: str, dim: int, after_seq: int,
                 batch: int = 5000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """As vectors.iter_changes; PostgreSQL's planner picks vectors_seq from its statistics."""
    return _streamed(conn, "SELECT owner_id, vector FROM vectors WHERE seq > %s AND kind = %s"
                     " AND model = %s AND dim = %s", (after_seq, kind, model, dim), dim, batch)


def owners_changed_since(conn: PgConnection, kind: str, after_seq: int) -> list[int]:
    return [r[0] for r in conn.sql(
        "SELECT owner_id FROM vectors WHERE seq > %s AND kind = %s"
        " UNION SELECT owner_id FROM vector_tombstones WHERE seq > %s AND kind = %s",
        (after_seq, kind, after_seq, kind))]


def changes_since(conn: PgConnection, kind: str, after_seq: int) -> int:
    return conn.sql(
        "SELECT (SELECT COUNT(*) FROM vectors WHERE seq > %s AND kind = %s)"
        " + (SELECT COUNT(*) FROM vector_tombstones WHERE seq > %s AND kind = %s)",
        (after_seq, kind, after_seq, kind)).fetchone()[0]


def owners_with_vectors(conn: PgConnection, kind: str, model: str, owner_ids: Sequence[int]) -> set[int]:
    if not owner_ids:
        return set()
    return {r[0] for r in conn.sql(
        "SELECT owner_id FROM vectors WHERE kind = %s AND owner_id = ANY(%s) AND model = %s",
        (kind, list(owner_ids), model))}


class PostgresVectors(PortableVectors):
    def changes_since(self, kind: str, after_seq: int) -> int:
        return self._run.read(changes_since, kind, after_seq)

    def owners_changed_since(self, kind: str, after_seq: int) -> list[int]:
        return self._run.read(owners_changed_since, kind, after_seq)

    def iter_changes(self, kind: str, model: str, dim: int, after_seq: int,
                     batch: int = 5000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self._run.iterate(iter_changes, kind, model, dim, after_seq, batch)

    def iter_space(self, kind: str, model: str, dim: int,
                   batch: int = 5000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self._run.iterate(iter_space, kind, model, dim, batch)

    def owners_with_vectors(self, kind: str, model: str, owner_ids: Sequence[int]) -> set[int]:
        return self._run.read(owners_with_vectors, kind, model, owner_ids)



# -- meta ----------------------------------------------------------------------------------

# The meta column is DOUBLE PRECISION, which holds every integer below 2**53 exactly.
STORE_ID_BITS = 52


def ensure_store_id(conn: PgConnection) -> int:
    return meta.ensure_store_id(conn, bits=STORE_ID_BITS)


class PostgresMeta(PortableMeta):
    def ensure_store_id(self) -> int:
        return self._run.write(ensure_store_id)
