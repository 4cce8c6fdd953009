"""Atoms on PostgreSQL: the portable aggregate (shared/store/portable/aggregates.py) with
PostgreSQL versions of the methods whose SQL is each engine's own — the search rows live in
this package's full-text tables (fulltext.py), id lists are arrays, new ids come back by
RETURNING, and a nullable persona is compared with IS NULL or =.

Reads that SQLite answers in an index's order without saying so (an id list looked up through
an index, GROUP BY output) say their order here: PostgreSQL's heap order is not the id order
once rows are updated, so the order SQLite's plan gives is written out as ORDER BY.

The functions take a PgConnection (connection.py): `execute` for the qmark SQL shared with
SQLite, `sql` for statements written for PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
import psycopg.sql

from shared.store.model.atoms import AtomOwner, AtomRow, in_chain
from shared.store.model.record import Record
from shared.store.portable import atoms, meta
from shared.store.portable.aggregates import PortableAtoms
from shared.store.postgres import fulltext
from shared.store.postgres.connection import PgConnection, persona_is
from shared.units import DAY


def atom_insert(tx: PgConnection, owner: AtomOwner, row: AtomRow, now: float, state: str = "active",
                superseded_by: int | None = None, needs_repair: bool = False) -> int:
    """As atoms.insert: only active atoms get a search row."""
    atom_id = tx.execute(atoms.INSERT_SQL + " RETURNING id", (
        owner.memory_id, owner.persona_id, owner.session_id, row.type, row.text, row.subject,
        row.attribute, row.value, row.confidence, owner.importance, row.ttl_days, row.deadline,
        state, now, superseded_by, int(needs_repair), owner.content_hash, now, now)).fetchone()[0]
    if state == "active":
        fulltext.add_row(tx.raw, "atoms", atom_id, (row.tokens,), owner.persona_id, owner.session_id)
    meta.bump_epoch(tx)
    return atom_id


_SIMILAR = Record.kind(("id", "tokens", "reinforcement_count", "confidence", "type"))


def similar_active(conn: PgConnection, terms: Sequence[str], persona_id: str | None,
                   other_than_memory: int, limit: int = 20) -> list[Record]:
    """As atoms.similar_active (FTS5's ORDER BY rank is raw best first; current atoms only);
    the tokens come from the search rows."""
    terms = sorted(set(terms))
    if not terms:
        return []
    source, params = fulltext.ranked_join("atoms", "memory_atoms", "a", terms,
                                  None if persona_id is None else [persona_id], None)
    persona, persona_params = persona_is("a.persona_id", persona_id)
    rows = conn.sql(psycopg.sql.SQL(
        "SELECT a.id, a.reinforcement_count, a.confidence, a.type {source} WHERE a.state = 'active'"
        f" AND {atoms.CURRENT} AND {{persona}} AND a.memory_id != %s"
        f" ORDER BY {fulltext.BEST_FIRST} LIMIT %s").format(
            # psycopg's stubs want a LiteralString; this SQL is put together from our own constants.
            source=source, persona=psycopg.sql.SQL(persona)),  # pyright: ignore[reportArgumentType]
        [*params, *persona_params, other_than_memory, limit]).fetchall()
    tokens = fulltext.stored_columns(conn.raw, "atoms", [r[0] for r in rows]) if rows else {}
    return [_SIMILAR((r[0], tokens.get(r[0], ("",))[0], r[1], r[2], r[3])) for r in rows]


def atom_search(conn: PgConnection, terms: Sequence[str], persona_id: str | None,
                session_id: str | None, types: Sequence[str] | None, limit: int) -> list[Record]:
    """As atoms.search: current active atoms holding any term, raw best first (ties by id)."""
    if not terms:
        return []
    source, params = fulltext.ranked_join("atoms", "memory_atoms", "a", terms,
                                  None if persona_id is None else [persona_id], session_id)
    clauses = ["a.state = 'active'", atoms.CURRENT]
    where_params: list[Any] = []
    _add_scope(clauses, where_params, persona_id, session_id)
    if types:
        clauses.append("a.type = ANY(%s)")
        where_params.append(list(types))
    return conn.sql(psycopg.sql.SQL(
        f"SELECT a.*, s.raw {{source}} WHERE {{where}} ORDER BY {fulltext.BEST_FIRST} LIMIT %s").format(
            # psycopg's stubs want a LiteralString; this SQL is put together from our own constants.
            source=source, where=psycopg.sql.SQL(" AND ".join(clauses))),  # pyright: ignore[reportArgumentType]
        [*params, *where_params, limit]).fetchall()


def still_valid_of_types(conn: PgConnection, types: Sequence[str], persona_id: str | None,
                         session_id: str | None, now: float, limit: int,
                         exclude: Sequence[int] = ()) -> list[Record]:
    """As atoms.still_valid_of_types, the excluded ids as an array."""
    clauses = ["a.state = 'active'", atoms.CURRENT, "a.type = ANY(%s)",
               f"NOT ({atoms.EXPIRED_SQL.replace('?', '%s')})", "NOT (a.id = ANY(%s))"]
    params: list[Any] = [list(types), now, DAY, now, list(exclude)]
    _add_scope(clauses, params, persona_id, session_id)
    return conn.sql(
        f"SELECT a.* FROM memory_atoms a WHERE {' AND '.join(clauses)}"
        " ORDER BY a.deadline IS NULL, a.deadline, a.id DESC LIMIT %s", [*params, limit]).fetchall()


def plans_due_between(conn: PgConnection, start: float | None, end: float | None,
                      persona_id: str | None, session_id: str | None, limit: int) -> list[Record]:
    """As atoms.plans_due_between."""
    clauses, params = atoms.plans_due_clauses(start, end, "%s")
    _add_scope(clauses, params, persona_id, session_id)
    return conn.sql(
        f"SELECT a.memory_id, MIN(a.deadline) AS deadline FROM memory_atoms a WHERE {' AND '.join(clauses)}"
        " GROUP BY a.memory_id ORDER BY MIN(a.deadline), a.memory_id LIMIT %s", [*params, limit]).fetchall()


def validity_rows(conn: PgConnection, memory_ids: Sequence[int]) -> list[Record]:
    if not memory_ids:
        return []
    return conn.sql(
        f"SELECT a.memory_id, a.type, a.state, a.ttl_days, a.deadline, a.create_time, a.state_time, {atoms.REPLACED_BY}"
        f" FROM memory_atoms a WHERE a.memory_id = ANY(%s) AND {atoms.CURRENT} ORDER BY a.memory_id, a.id",
        (list(memory_ids),)).fetchall()


def forget(tx: PgConnection, expired_before: float, now: float) -> list[int]:
    """As atoms.forget: the state changes as on SQLite; the search rows leave fulltext's table."""
    ids = atoms.forget_states(tx, expired_before, now)
    if ids:
        fulltext.remove_rows(tx.raw, "atoms", ids)
    return ids


def atoms_delete_for_memory(tx: PgConnection, memory_id: int) -> dict[str, int]:
    ids = [r[0] for r in tx.sql("SELECT id FROM memory_atoms WHERE memory_id = %s", (memory_id,))]
    fts = fulltext.remove_rows(tx.raw, "atoms", ids) if ids else 0
    removed = tx.sql("DELETE FROM memory_atoms WHERE memory_id = %s", (memory_id,)).rowcount
    if removed:
        meta.bump_epoch(tx)
    return {"memory_atoms": removed, "atoms_fts": fts}


def supersede_chain(conn: PgConnection, atom_id: int, persona_id: str | None,
                    max_steps: int = 20) -> list[Record]:
    """As atoms.supersede_chain; the seeds are typed (PostgreSQL types a recursive query's
    columns from its first SELECT)."""
    persona, persona_params = persona_is("a.persona_id", persona_id)
    return in_chain(atom_id, conn.sql(
        "WITH RECURSIVE back(id, step) AS (SELECT %s::bigint, 0 UNION SELECT a.id, back.step + 1 FROM back"
        f" JOIN memory_atoms a ON {persona} AND a.state = 'superseded'"
        " AND a.superseded_by = back.id WHERE back.step < %s),"
        " ahead(id, step) AS (SELECT %s::bigint, 0 UNION SELECT a.superseded_by, ahead.step + 1 FROM ahead"
        " JOIN memory_atoms a ON a.id = ahead.id WHERE a.state = 'superseded'"
        " AND a.superseded_by IS NOT NULL AND ahead.step < %s)"
        " SELECT a.id, a.text, a.state, a.memory_id, a.superseded_by FROM memory_atoms a"
        " WHERE a.id IN (SELECT id FROM back UNION SELECT id FROM ahead)"
        f" AND {persona} AND {atoms.CURRENT} ORDER BY a.id",
        [atom_id, *persona_params, max_steps, atom_id, max_steps, *persona_params]).fetchall())


class PostgresAtoms(PortableAtoms):
    def insert(self, owner: AtomOwner, row: AtomRow, now: float, state: str = "active",
               superseded_by: int | None = None, needs_repair: bool = False) -> int:
        return self._run.write(atom_insert, owner, row, now, state, superseded_by, needs_repair)

    def forget(self, expired_before: float, now: float) -> list[int]:
        return self._run.write(forget, expired_before, now)

    def delete_for_memory(self, memory_id: int) -> dict[str, int]:
        return self._run.write(atoms_delete_for_memory, memory_id)

    def similar_active(self, terms: Sequence[str], persona_id: str | None, other_than_memory: int,
                       limit: int = 20) -> list[Record]:
        return self._run.rows(similar_active, terms, persona_id, other_than_memory, limit)

    def search(self, terms: Sequence[str], persona_id: str | None, session_id: str | None,
               types: Sequence[str] | None, limit: int) -> list[Record]:
        return self._run.rows(atom_search, terms, persona_id, session_id, types, limit)

    def still_valid_of_types(self, types: Sequence[str], persona_id: str | None, session_id: str | None,
                             now: float, limit: int, exclude: Sequence[int] = ()) -> list[Record]:
        return self._run.rows(still_valid_of_types, types, persona_id, session_id, now, limit, exclude)

    def validity_rows(self, memory_ids: Sequence[int]) -> list[Record]:
        return self._run.rows(validity_rows, memory_ids)

    def plans_due_between(self, start: float | None, end: float | None, persona_id: str | None,
                          session_id: str | None, limit: int) -> list[Record]:
        return self._run.rows(plans_due_between, start, end, persona_id, session_id, limit)

    def supersede_chain(self, atom_id: int, persona_id: str | None, max_steps: int = 20) -> list[Record]:
        return self._run.rows(supersede_chain, atom_id, persona_id, max_steps)


def _add_scope(clauses: list[str], params: list[Any], persona_id: str | None, session_id: str | None) -> None:
    """The persona and session an atom read keeps to (None: any)."""
    for column, wanted in (("persona_id", persona_id), ("session_id", session_id)):
        if wanted is not None:
            clauses.append(f"a.{column} = %s")
            params.append(wanted)
