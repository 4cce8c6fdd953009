"""Memory atoms: typed facts with a shelf life, in SQL both engines run, and the clauses both
engines' own atom SQL shares (CURRENT, REPLACED_BY, INSERT_SQL, EXPIRED_SQL); the full-text
index is each engine's own (sqlite/atoms.py, postgres/atoms.py).

The SQL only: what reinforcement and superseding mean is decided in shared/atom_life.py,
which calls these functions.
"""

from __future__ import annotations

from typing import Any

from shared.store.model.atoms import DATED_STATES
from shared.store.portable import meta
from shared.store.portable.connection import Connection
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


INSERT_SQL = ("INSERT INTO memory_atoms (memory_id, persona_id, session_id, type, text, subject, attribute,"
           " value, confidence, importance, ttl_days, deadline, state, state_time, superseded_by,"
           " needs_repair, content_hash, create_time, update_time)"
           " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def set_reinforcement(conn: Connection, atom_id: int, count: int, confidence: float,
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


def supersede(conn: Connection, persona_id: str | None, subject: str, attribute: str,
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


def of_memory(conn: Connection, memory_id: int) -> list[Any]:
    """A memory's current atoms in the order they were stored."""
    return conn.execute(f"SELECT a.* FROM memory_atoms a WHERE a.memory_id = ? AND {CURRENT} ORDER BY a.id",
                        (memory_id,)).fetchall()


def reinforced_by(conn: Connection, memory_id: int) -> list[Any]:
    """The atoms this memory reinforced (through its dormant provenance rows): id, type,
    importance, reinforcement_count, confidence."""
    return conn.execute(
        "SELECT a.id, a.type, a.importance, a.reinforcement_count, a.confidence FROM memory_atoms d"
        " JOIN memory_atoms a ON a.id = d.superseded_by WHERE d.memory_id = ? AND d.state = 'dormant'"
        " AND a.memory_id != ?", (memory_id, memory_id)).fetchall()


def reactivate_superseded_by(conn: Connection, memory_id: int, now: float) -> int:
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
EXPIRED_SQL = ("(a.deadline IS NOT NULL AND a.deadline < ?) OR (a.deadline IS NULL AND a.ttl_days IS NOT NULL"
                " AND COALESCE(a.state_time, a.create_time) + a.ttl_days * ? < ?)")


def plans_due_clauses(start: float | None, end: float | None, mark: str) -> tuple[list[str], list[str | float]]:
    """The conditions of a dated plan due in [start, end), portable SQL for both engines (mark:
    the engine's parameter marker), with their parameters."""
    clauses = ["a.type = 'planned'", CURRENT, "a.deadline IS NOT NULL",
               f"a.state IN ({', '.join(repr(s) for s in DATED_STATES)})"]
    params: list[str | float] = []
    if start is not None:
        clauses.append(f"a.deadline >= {mark}")
        params.append(start)
    if end is not None:
        clauses.append(f"a.deadline < {mark}")
        params.append(end)
    return clauses, params


def expire(conn: Connection, now: float) -> list[int]:
    """Active atoms past their deadline or their shelf life become expired; return their ids."""
    ids = [r[0] for r in conn.execute(
        f"SELECT a.id FROM memory_atoms a WHERE a.state = 'active' AND ({EXPIRED_SQL}) ORDER BY a.id",
        (now, DAY, now))]
    _set_state(conn, ids, "expired", now)
    return ids


def forget_states(conn: Connection, expired_before: float, now: float) -> list[int]:
    """forget() but for the full-text rows (which another engine keeps elsewhere)."""
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM memory_atoms WHERE state = 'expired' AND state_time < ? ORDER BY id",
        (expired_before,))]
    _set_state(conn, ids, "forgotten", now)
    return ids


def purge(conn: Connection, forgotten_before: float, now: float) -> list[int]:
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


def counts_by_type_and_state(conn: Connection) -> list[tuple[str, str, int]]:
    return conn.execute("SELECT type, state, COUNT(*) FROM memory_atoms GROUP BY type, state").fetchall()


def page(conn: Connection, atom_type: str | None, state: str | None, persona_id: str | None,
         limit: int, offset: int) -> list[Any]:
    """Current atoms newest first (the panel's atoms page), of a type, a state and a persona
    when given; with no state, every state but dormant (a reinforcement's provenance row).
    Portable SQL (both engines)."""
    clauses: list[str] = [CURRENT]
    params: list[str] = []
    for column, value in (("type", atom_type), ("state", state), ("persona_id", persona_id)):
        if value is not None:
            clauses.append(f"a.{column} = ?")
            params.append(value)
    if state is None:
        clauses.append("a.state != 'dormant'")
    return conn.execute(f"SELECT a.* FROM memory_atoms a WHERE {' AND '.join(clauses)}"
                        " ORDER BY a.id DESC LIMIT ? OFFSET ?", (*params, limit, offset)).fetchall()

