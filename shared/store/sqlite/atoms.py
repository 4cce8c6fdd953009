"""Atoms on SQLite: the writes and reads that touch the FTS5 index (atoms_fts), use INSERT OR
IGNORE, json_each or a recursive chain walk. The rest is portable (portable/atoms.py)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from shared.store.model.atoms import AtomOwner, AtomRow, in_chain
from shared.store.portable import meta
from shared.store.portable.atoms import CURRENT, EXPIRED_SQL, INSERT_SQL, REPLACED_BY, forget_states, plans_due_clauses
from shared.store.portable.connection import Connection
from shared.store.sqlite.match import any_of
from shared.units import DAY


def insert(conn: sqlite3.Connection, owner: AtomOwner, row: AtomRow, now: float, state: str = "active",
           superseded_by: int | None = None, needs_repair: bool = False) -> int:
    """Store one atom; only active atoms go into the full-text index."""
    cur = conn.execute(INSERT_SQL, (
        owner.memory_id, owner.persona_id, owner.session_id, row.type, row.text, row.subject,
        row.attribute, row.value, row.confidence, owner.importance, row.ttl_days, row.deadline,
        state, now, superseded_by, int(needs_repair), owner.content_hash, now, now))
    if state == "active":
        conn.execute("INSERT INTO atoms_fts (rowid, tokens) VALUES (?, ?)", (cur.lastrowid, row.tokens))
    meta.bump_epoch(conn)
    assert cur.lastrowid is not None  # an INSERT's cursor has its row's id
    return cur.lastrowid


def similar_active(conn: sqlite3.Connection, terms: Sequence[str], persona_id: str | None,
                   other_than_memory: int, limit: int = 20) -> list[sqlite3.Row]:
    """Current active atoms of a persona (not of the given memory) sharing terms with the
    given ones, best BM25 first: id, tokens, reinforcement_count, confidence, type."""
    match = any_of(sorted(set(terms)))
    if match is None:
        return []
    return conn.execute(
        "SELECT a.id, f.tokens, a.reinforcement_count, a.confidence, a.type FROM atoms_fts f"
        f" JOIN memory_atoms a ON a.id = f.rowid WHERE atoms_fts MATCH ? AND a.state = 'active' AND {CURRENT}"
        " AND a.persona_id IS ? AND a.memory_id != ? ORDER BY rank LIMIT ?",
        (match, persona_id, other_than_memory, limit)).fetchall()


def _scoped(clauses: list[str], params: list[str | float], persona_id: str | None, session_id: str | None) -> None:
    for column, value in (("persona_id", persona_id), ("session_id", session_id)):
        if value is not None:
            clauses.append(f"a.{column} = ?")
            params.append(value)


def search(conn: sqlite3.Connection, terms: Sequence[str], persona_id: str | None,
           session_id: str | None, types: Sequence[str] | None, limit: int) -> list[sqlite3.Row]:
    """Current active atoms matching any of the terms, best BM25 first, with raw score
    (higher is better)."""
    match = any_of(terms)
    if match is None:
        return []
    clauses = ["a.state = 'active'", CURRENT]
    params: list[str | float] = []
    _scoped(clauses, params, persona_id, session_id)
    if types:
        clauses.append(f"a.type IN ({','.join('?' * len(types))})")
        params.extend(types)
    where = " AND ".join(clauses)
    return conn.execute(
        "SELECT a.*, -bm25(atoms_fts) AS raw FROM atoms_fts JOIN memory_atoms a ON a.id = atoms_fts.rowid"
        f" WHERE atoms_fts MATCH ? AND {where} ORDER BY raw DESC LIMIT ?",
        (match, *params, limit)).fetchall()


def still_valid_of_types(conn: sqlite3.Connection, types: Sequence[str], persona_id: str | None,
                         session_id: str | None, now: float, limit: int,
                         exclude: Sequence[int] = ()) -> list[sqlite3.Row]:
    """Current active atoms of the given types that the atom sweep would not expire at `now` (the
    test of expire()), except the excluded ids: those with a deadline soonest first, then the
    others newest first."""
    clauses = ["a.state = 'active'", CURRENT, f"a.type IN ({','.join('?' * len(types))})",
               f"NOT ({EXPIRED_SQL})", "a.id NOT IN (SELECT value FROM json_each(?))"]
    params: list[str | float] = [*types, now, DAY, now, json.dumps(list(exclude))]
    _scoped(clauses, params, persona_id, session_id)
    return conn.execute(
        f"SELECT a.* FROM memory_atoms a WHERE {' AND '.join(clauses)}"
        " ORDER BY a.deadline IS NULL, a.deadline, a.id DESC LIMIT ?", (*params, limit)).fetchall()


def plans_due_between(conn: sqlite3.Connection, start: float | None, end: float | None,
                      persona_id: str | None, session_id: str | None, limit: int) -> list[sqlite3.Row]:
    """Memories with a current plan (active or expired) due at or after `start` and before
    `end` (either may be open): memory_id and its earliest such deadline, soonest first.
    Portable SQL (both engines)."""
    clauses, params = plans_due_clauses(start, end, "?")
    _scoped(clauses, params, persona_id, session_id)
    return conn.execute(
        f"SELECT a.memory_id, MIN(a.deadline) AS deadline FROM memory_atoms a WHERE {' AND '.join(clauses)}"
        " GROUP BY a.memory_id ORDER BY MIN(a.deadline), a.memory_id LIMIT ?", (*params, limit)).fetchall()


def validity_rows(conn: sqlite3.Connection, memory_ids: Sequence[int]) -> list[sqlite3.Row]:
    """What the time factor of the memories' current atoms depends on: memory_id, type,
    state, ttl_days, deadline, create_time, state_time; and replaced_by, the memory whose
    atom superseded a superseded one."""
    if not memory_ids:
        return []
    return conn.execute(
        f"SELECT a.memory_id, a.type, a.state, a.ttl_days, a.deadline, a.create_time, a.state_time, {REPLACED_BY}"
        f" FROM memory_atoms a WHERE a.memory_id IN (SELECT value FROM json_each(?)) AND {CURRENT}",
        (json.dumps(list(memory_ids)),)).fetchall()


def forget(conn: sqlite3.Connection, expired_before: float, now: float) -> list[int]:
    """Expired long enough: forgotten — out of the full-text index, the row kept."""
    ids = forget_states(conn, expired_before, now)
    conn.executemany("DELETE FROM atoms_fts WHERE rowid = ?", [(i,) for i in ids])
    return ids


def delete_for_memory(conn: Connection, memory_id: int) -> dict[str, int]:
    """Remove a memory's atoms and their FTS rows; return {table: rows removed}."""
    fts = conn.execute(
        "DELETE FROM atoms_fts WHERE rowid IN (SELECT id FROM memory_atoms WHERE memory_id = ?)",
        (memory_id,)).rowcount
    atoms = conn.execute("DELETE FROM memory_atoms WHERE memory_id = ?", (memory_id,)).rowcount
    if atoms:
        meta.bump_epoch(conn)
    return {"memory_atoms": atoms, "atoms_fts": fts}


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {
        "memory_atoms": conn.execute("SELECT COUNT(*) FROM memory_atoms").fetchone()[0],
        "atoms_fts": conn.execute("SELECT COUNT(*) FROM atoms_fts").fetchone()[0],
    }


def supersede_chain(conn: sqlite3.Connection, atom_id: int, persona_id: str | None,
                    max_steps: int = 20) -> list[sqlite3.Row]:
    """The atoms one atom replaced and those that replaced it, with itself, oldest first:
    id, text, state, memory_id, superseded_by; of those, the current ones of the persona (a
    chain may reach an atom whose memory has moved since). Just itself when it is in no
    chain; nothing when it is not current itself. Superseding stays within a persona, so the
    backward step reads the (persona_id, state) index."""
    return in_chain(atom_id, conn.execute(
        "WITH RECURSIVE back(id, step) AS (SELECT ?, 0 UNION SELECT a.id, back.step + 1 FROM back"
        " JOIN memory_atoms a ON a.persona_id IS ? AND a.state = 'superseded'"
        " AND a.superseded_by = back.id WHERE back.step < ?),"
        " ahead(id, step) AS (SELECT ?, 0 UNION SELECT a.superseded_by, ahead.step + 1 FROM ahead"
        " JOIN memory_atoms a ON a.id = ahead.id WHERE a.state = 'superseded'"
        " AND a.superseded_by IS NOT NULL AND ahead.step < ?)"
        " SELECT a.id, a.text, a.state, a.memory_id, a.superseded_by FROM memory_atoms a"
        f" WHERE a.id IN (SELECT id FROM back UNION SELECT id FROM ahead) AND a.persona_id IS ? AND {CURRENT}"
        " ORDER BY a.id",
        (atom_id, persona_id, max_steps, atom_id, max_steps, persona_id)).fetchall())
