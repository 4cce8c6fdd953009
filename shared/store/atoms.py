"""Memory atoms: typed facts with a shelf life, and their full-text index.

The SQL only: what reinforcement and superseding mean is decided in shared/atom_life.py,
which calls these functions.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from shared.store import meta
from shared.store.model.atoms import DATED_STATES, AtomOwner, AtomRow, in_chain
from shared.store.portable.connection import Connection
from shared.store.sqlite.match import any_of
from shared.units import DAY

# An atom is shown only while its memory is what the atom was derived from: in the same
# persona and session, with the same text. An update that changes any of them outdates the
# memory's atoms in its own transaction (outdate(), from documents.update): they stay, so that
# the atoms stage can undo what they reinforced or superseded (shared/atom_life.py) when it
# derives the memory again, but no read shows them, worker or no worker. A test of the atom's
# own row (`a`), so no read pays a join for it.
CURRENT = "a.content_hash IS NOT NULL"
# The memory whose atom superseded atom `a` (portable SQL; NULL unless `a` was superseded).
REPLACED_BY = ("(SELECT n.memory_id FROM memory_atoms n WHERE n.id = a.superseded_by"
               " AND a.state = 'superseded') AS replaced_by")


_INSERT = ("INSERT INTO memory_atoms (memory_id, persona_id, session_id, type, text, subject, attribute,"
           " value, confidence, importance, ttl_days, deadline, state, state_time, superseded_by,"
           " needs_repair, content_hash, create_time, update_time)"
           " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def insert(conn: sqlite3.Connection, owner: AtomOwner, row: AtomRow, now: float, state: str = "active",
           superseded_by: int | None = None, needs_repair: bool = False) -> int:
    """Store one atom; only active atoms go into the full-text index."""
    cur = conn.execute(_INSERT, (
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


def set_reinforcement(conn: sqlite3.Connection, atom_id: int, count: int, confidence: float,
                      ttl_days: float, now: float, restart: bool) -> None:
    """A new reinforcement count with its shelf life; `restart` dates the atom's age from now."""
    conn.execute("UPDATE memory_atoms SET reinforcement_count = ?, confidence = ?, ttl_days = ?,"
                 " state_time = CASE WHEN ? = 1 THEN ? ELSE state_time END, update_time = ? WHERE id = ?",
                 (count, confidence, ttl_days, int(restart), now, now, atom_id))
    meta.bump_epoch(conn)


# When an atom's memory was said (its original time, else when it was stored); a slot's atoms
# are ordered as said, ties by memory id, then by atom id (a memory's own in their order).
# Portable SQL over an atom `a` joined with its memory `d`.
SAID = "COALESCE(d.original_ts, d.create_time)"
_SAID_ORDER = f"({SAID}, a.memory_id, a.id)"


def supersede(conn: sqlite3.Connection, persona_id: str | None, subject: str, attribute: str,
              value: str, new_id: int, now: float) -> int:
    """Atom new_id takes its place among the current atoms of its slot (persona, subject,
    attribute) in the order they were said, whatever the order they were stored in: it
    supersedes those said before it that give another value and are active, or superseded by
    one said after it; and it is superseded itself by the first one said after it that gives
    another value, if any. Returns how many it superseded. Portable SQL (both engines)."""
    said = conn.execute(f"SELECT {SAID}, a.memory_id, a.id FROM memory_atoms a JOIN documents d"
                        " ON d.id = a.memory_id WHERE a.id = ?", (new_id,)).fetchone()
    if said is None:
        return 0
    slot = (f"FROM memory_atoms a JOIN documents d ON d.id = a.memory_id WHERE {CURRENT}"
            f" AND a.persona_id {'IS NULL' if persona_id is None else '= ?'} AND a.subject = ?"
            " AND a.attribute = ? AND a.value != ?")
    params = [*([] if persona_id is None else [persona_id]), subject, attribute, value]
    # An earlier atom superseded by one said after new_id (stored before new_id was) now
    # leads to new_id, the next in the timeline.
    earlier = [r[0] for r in conn.execute(
        f"SELECT a.id {slot} AND {_SAID_ORDER} < (?, ?, ?) AND (a.state = 'active'"
        " OR (a.state = 'superseded' AND EXISTS (SELECT 1 FROM memory_atoms n JOIN documents nd"
        " ON nd.id = n.memory_id WHERE n.id = a.superseded_by"
        " AND (COALESCE(nd.original_ts, nd.create_time), n.memory_id, n.id) > (?, ?, ?))))",
        (*params, *said, *said))]
    later = conn.execute(f"SELECT a.id {slot} AND {_SAID_ORDER} > (?, ?, ?) AND a.state IN"
                         f" ('active', 'superseded') ORDER BY {SAID}, a.memory_id, a.id LIMIT 1",
                         (*params, *said)).fetchone()
    replaced = [(i, new_id) for i in earlier] + ([(new_id, later[0])] if later else [])
    conn.executemany("UPDATE memory_atoms SET state = 'superseded', superseded_by = ?, state_time = ?,"
                     " update_time = ? WHERE id = ?", [(by, now, now, i) for i, by in replaced])
    if replaced:
        meta.bump_epoch(conn)
    return len(earlier)


def of_memory(conn: sqlite3.Connection, memory_id: int) -> list[sqlite3.Row]:
    """A memory's current atoms in the order they were stored."""
    return conn.execute(f"SELECT a.* FROM memory_atoms a WHERE a.memory_id = ? AND {CURRENT} ORDER BY a.id",
                        (memory_id,)).fetchall()


def reinforced_by(conn: sqlite3.Connection, memory_id: int) -> list[sqlite3.Row]:
    """The atoms this memory reinforced (through its dormant provenance rows): id, type,
    importance, reinforcement_count, confidence."""
    return conn.execute(
        "SELECT a.id, a.type, a.importance, a.reinforcement_count, a.confidence FROM memory_atoms d"
        " JOIN memory_atoms a ON a.id = d.superseded_by WHERE d.memory_id = ? AND d.state = 'dormant'"
        " AND a.memory_id != ?", (memory_id, memory_id)).fetchall()


def reactivate_superseded_by(conn: sqlite3.Connection, memory_id: int, now: float) -> int:
    """Atoms of other memories that this memory's atoms superseded leave it: each is superseded
    by what superseded the atom that superseded it (the next in its slot's timeline) when that
    is of another memory and gives another value, else active again. Returns how many."""
    rows = conn.execute(
        "SELECT a.id, CASE WHEN s.memory_id != ? AND s.value != a.value THEN s.id END FROM memory_atoms a"
        " JOIN memory_atoms n ON n.id = a.superseded_by LEFT JOIN memory_atoms s ON s.id = n.superseded_by"
        " AND n.state = 'superseded' WHERE a.state = 'superseded' AND n.memory_id = ? AND a.memory_id != ?"
        " ORDER BY a.id", (memory_id, memory_id, memory_id)).fetchall()
    _set_state(conn, [i for i, by in rows if by is None], "active", now)
    # Superseded atoms keep their full-text row (they are shown in chains), so none to restore.
    conn.executemany("UPDATE memory_atoms SET superseded_by = ?, update_time = ? WHERE id = ?",
                     [(by, now, i) for i, by in rows])
    if rows:
        meta.bump_epoch(conn)
    return len(rows)


# An active atom the sweep expires at time ?: past its deadline, or past its shelf life
# (parameters: now, seconds per day, now).
_EXPIRED_SQL = ("(a.deadline IS NOT NULL AND a.deadline < ?) OR (a.deadline IS NULL AND a.ttl_days IS NOT NULL"
                " AND COALESCE(a.state_time, a.create_time) + a.ttl_days * ? < ?)")


def _scoped(clauses: list[str], params: list, persona_id: str | None, session_id: str | None) -> None:
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
    clauses, params = ["a.state = 'active'", CURRENT], []
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
               f"NOT ({_EXPIRED_SQL})", "a.id NOT IN (SELECT value FROM json_each(?))"]
    params: list = [*types, now, DAY, now, json.dumps(list(exclude))]
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


def plans_due_clauses(start: float | None, end: float | None, mark: str) -> tuple[list[str], list]:
    """The conditions of a dated plan due in [start, end), portable SQL for both engines (mark:
    the engine's parameter marker), with their parameters."""
    clauses = ["a.type = 'planned'", CURRENT, "a.deadline IS NOT NULL",
               f"a.state IN ({', '.join(repr(s) for s in DATED_STATES)})"]
    params: list = []
    if start is not None:
        clauses.append(f"a.deadline >= {mark}")
        params.append(start)
    if end is not None:
        clauses.append(f"a.deadline < {mark}")
        params.append(end)
    return clauses, params


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


def expire(conn: sqlite3.Connection, now: float) -> list[int]:
    """Active atoms past their deadline or their shelf life become expired; return their ids."""
    ids = [r[0] for r in conn.execute(
        f"SELECT a.id FROM memory_atoms a WHERE a.state = 'active' AND ({_EXPIRED_SQL}) ORDER BY a.id",
        (now, DAY, now))]
    _set_state(conn, ids, "expired", now)
    return ids


def forget(conn: sqlite3.Connection, expired_before: float, now: float) -> list[int]:
    """Expired long enough: forgotten — out of the full-text index, the row kept."""
    ids = forget_states(conn, expired_before, now)
    conn.executemany("DELETE FROM atoms_fts WHERE rowid = ?", [(i,) for i in ids])
    return ids


def forget_states(conn: Connection, expired_before: float, now: float) -> list[int]:
    """forget() but for the full-text rows (which another engine keeps elsewhere)."""
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM memory_atoms WHERE state = 'expired' AND state_time < ? ORDER BY id",
        (expired_before,))]
    _set_state(conn, ids, "forgotten", now)
    return ids


def purge(conn: sqlite3.Connection, forgotten_before: float, now: float) -> list[int]:
    """Forgotten long enough: purged. Returns their ids (their graph output goes too)."""
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM memory_atoms WHERE state = 'forgotten' AND state_time < ? ORDER BY id",
        (forgotten_before,))]
    _set_state(conn, ids, "purged", now)
    return ids


def _set_state(conn: Connection, ids: list[int], state: str, now: float) -> None:
    conn.executemany("UPDATE memory_atoms SET state = ?, state_time = ?, update_time = ? WHERE id = ?",
                     [(state, now, now, i) for i in ids])
    if ids:
        meta.bump_epoch(conn)


def outdate(conn: Connection, memory_id: int) -> None:
    """A memory's atoms no longer fit it (see CURRENT): their content hash, the version they
    were made from, is cleared, and no read shows them until the atoms stage replaces them."""
    if conn.execute("UPDATE memory_atoms SET content_hash = NULL WHERE memory_id = ?"
                    " AND content_hash IS NOT NULL", (memory_id,)).rowcount:
        meta.bump_epoch(conn)


def delete_for_memory(conn: Connection, memory_id: int) -> dict[str, int]:
    """Remove a memory's atoms and their FTS rows; return {table: rows removed}."""
    fts = conn.execute(
        "DELETE FROM atoms_fts WHERE rowid IN (SELECT id FROM memory_atoms WHERE memory_id = ?)",
        (memory_id,)).rowcount
    atoms = conn.execute("DELETE FROM memory_atoms WHERE memory_id = ?", (memory_id,)).rowcount
    if atoms:
        meta.bump_epoch(conn)
    return {"memory_atoms": atoms, "atoms_fts": fts}


def counts_by_type_and_state(conn: sqlite3.Connection) -> list[tuple[str, str, int]]:
    return conn.execute("SELECT type, state, COUNT(*) FROM memory_atoms GROUP BY type, state").fetchall()


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {
        "memory_atoms": conn.execute("SELECT COUNT(*) FROM memory_atoms").fetchone()[0],
        "atoms_fts": conn.execute("SELECT COUNT(*) FROM atoms_fts").fetchone()[0],
    }


def page(conn: sqlite3.Connection, atom_type: str | None, state: str | None, persona_id: str | None,
         limit: int, offset: int) -> list[sqlite3.Row]:
    """Current atoms newest first (the panel's atoms page), of a type, a state and a persona
    when given; with no state, every state but dormant (a reinforcement's provenance row).
    Portable SQL (both engines)."""
    clauses, params = [CURRENT], []
    for column, value in (("type", atom_type), ("state", state), ("persona_id", persona_id)):
        if value is not None:
            clauses.append(f"a.{column} = ?")
            params.append(value)
    if state is None:
        clauses.append("a.state != 'dormant'")
    return conn.execute(f"SELECT a.* FROM memory_atoms a WHERE {' AND '.join(clauses)}"
                        " ORDER BY a.id DESC LIMIT ? OFFSET ?", (*params, limit, offset)).fetchall()


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

