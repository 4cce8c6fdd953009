"""Memory atoms: typed facts with a shelf life, and their full-text index."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Callable, Sequence

from shared.decay import DAY, atom_time_factor
from shared.store import runtime

ATOM_TYPES = ("episodic", "planned", "factual", "relational", "preference", "unknown")
ATOM_STATES = ("active", "expired", "forgotten", "purged", "dormant", "superseded")

DDL = [
    f"""
    CREATE TABLE memory_atoms (
        id INTEGER PRIMARY KEY,
        memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        persona_id TEXT,
        session_id TEXT,
        type TEXT NOT NULL CHECK (type IN {ATOM_TYPES!r}),
        text TEXT NOT NULL,
        subject TEXT,
        attribute TEXT,
        value TEXT,
        confidence REAL NOT NULL DEFAULT 0.0,
        importance REAL NOT NULL DEFAULT 0.5,
        ttl_days REAL,
        deadline REAL,
        reinforcement_count INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL DEFAULT 'active' CHECK (state IN {ATOM_STATES!r}),
        state_time REAL,
        superseded_by INTEGER REFERENCES memory_atoms(id) ON DELETE SET NULL,
        needs_repair INTEGER NOT NULL DEFAULT 0,
        content_hash TEXT,
        create_time REAL NOT NULL,
        update_time REAL NOT NULL
    )
    """,
    "CREATE INDEX memory_atoms_memory ON memory_atoms (memory_id)",
    "CREATE INDEX memory_atoms_persona_state ON memory_atoms (persona_id, state)",
    "CREATE VIRTUAL TABLE atoms_fts USING fts5(tokens, tokenize = 'porter unicode61 remove_diacritics 2')",
]


@dataclass(frozen=True)
class AtomRow:
    """One atom to store for a memory (already classified)."""

    type: str
    text: str
    tokens: str
    confidence: float
    subject: str | None = None
    attribute: str | None = None
    value: str | None = None
    deadline: float | None = None
    ttl_days: float | None = None


@dataclass
class AtomsOutcome:
    inserted: int = 0
    reinforced: int = 0
    superseded: int = 0
    needs_repair: int = 0


@dataclass(frozen=True)
class MemoryAtoms:
    """Everything replace_for_memory needs besides the rows."""

    memory_id: int
    persona_id: str | None
    session_id: str | None
    importance: float
    content_hash: str
    reinforce_jaccard: float
    ttl_for: Callable[[str, float, int], float]  # (type, importance, reinforcements) -> days


def replace_for_memory(conn: sqlite3.Connection, owner: MemoryAtoms, rows: Sequence[AtomRow],
                       now: float) -> AtomsOutcome:
    """A memory's atoms, replaced: each new atom either reinforces a near-identical active atom
    of the same persona or is inserted (superseding an active atom that gave another value for
    the same subject and attribute). Rows go in as a batch; if the batch fails, row by row, and
    a row that still fails is stored flagged needs_repair."""
    delete_for_memory(conn, owner.memory_id, now)
    outcome = AtomsOutcome()
    fresh = []
    for row in rows:
        reinforced = _reinforce(conn, owner, row, now)
        if reinforced is None:
            fresh.append(row)
            continue
        outcome.reinforced += 1
        # Provenance: this memory said it too. Dormant, so never searched or counted twice.
        _insert_one(conn, owner, row, now, state="dormant", superseded_by=reinforced)
    for row, atom_id in _insert_batch(conn, owner, fresh, now, outcome):
        if row.subject and row.attribute and row.value:
            outcome.superseded += _supersede(conn, owner, row, atom_id, now)
    runtime.bump_epoch(conn)
    return outcome


def _reinforce(conn: sqlite3.Connection, owner: MemoryAtoms, row: AtomRow, now: float) -> int | None:
    """Reinforce the most similar active atom if similar enough; return its id."""
    terms = set(row.tokens.split())
    if not terms:
        return None
    from shared.search.bm25 import match_expression
    from shared.search.mmr import jaccard

    candidates = conn.execute(
        "SELECT a.id, f.tokens, a.reinforcement_count, a.confidence, a.type FROM atoms_fts f"
        " JOIN memory_atoms a ON a.id = f.rowid WHERE atoms_fts MATCH ? AND a.state = 'active'"
        " AND a.persona_id IS ? AND a.memory_id != ? ORDER BY rank LIMIT 20",
        (match_expression(sorted(terms)), owner.persona_id, owner.memory_id)).fetchall()
    best = max(candidates, key=lambda c: jaccard(terms, c[1].split()), default=None)
    if best is None or jaccard(terms, best[1].split()) < owner.reinforce_jaccard:
        return None
    atom_id, _, count, confidence, atom_type = best
    conn.execute(
        "UPDATE memory_atoms SET reinforcement_count = ?, confidence = ?, ttl_days = ?,"
        " state_time = ?, update_time = ? WHERE id = ?",
        (count + 1, max(confidence, row.confidence), owner.ttl_for(atom_type, owner.importance, count + 1),
         now, now, atom_id))
    return atom_id


_INSERT = ("INSERT INTO memory_atoms (memory_id, persona_id, session_id, type, text, subject, attribute,"
           " value, confidence, importance, ttl_days, deadline, state, state_time, superseded_by,"
           " needs_repair, content_hash, create_time, update_time)"
           " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def _insert_one(conn, owner: MemoryAtoms, row: AtomRow, now: float, needs_repair: int = 0,
                state: str = "active", superseded_by: int | None = None) -> int:
    """Store one atom; only active atoms go into the full-text index."""
    cur = conn.execute(_INSERT, (
        owner.memory_id, owner.persona_id, owner.session_id, row.type, row.text, row.subject,
        row.attribute, row.value, row.confidence, owner.importance, row.ttl_days, row.deadline,
        state, now, superseded_by, needs_repair, owner.content_hash, now, now))
    if state == "active":
        conn.execute("INSERT INTO atoms_fts (rowid, tokens) VALUES (?, ?)", (cur.lastrowid, row.tokens))
    return cur.lastrowid


def _insert_batch(conn, owner: MemoryAtoms, rows: Sequence[AtomRow], now: float,
                  outcome: AtomsOutcome) -> list[tuple[AtomRow, int]]:
    conn.execute("SAVEPOINT atoms_batch")
    try:
        stored = [(row, _insert_one(conn, owner, row, now)) for row in rows]
        conn.execute("RELEASE atoms_batch")
        outcome.inserted += len(stored)
        return stored
    except sqlite3.Error:
        conn.execute("ROLLBACK TO atoms_batch")
        conn.execute("RELEASE atoms_batch")
    stored = []
    for row in rows:
        conn.execute("SAVEPOINT atoms_row")
        try:
            stored.append((row, _insert_one(conn, owner, row, now)))
            conn.execute("RELEASE atoms_row")
            outcome.inserted += 1
        except sqlite3.Error:
            conn.execute("ROLLBACK TO atoms_row")
            conn.execute("RELEASE atoms_row")
            # Keep what can be kept, flagged for `aokun repair`, instead of losing the fact.
            _insert_one(conn, owner, AtomRow("unknown", str(row.text)[:2000], str(row.tokens), 0.0),
                        now, needs_repair=1)
            outcome.needs_repair += 1
    return stored


def _supersede(conn, owner: MemoryAtoms, row: AtomRow, new_id: int, now: float) -> int:
    return conn.execute(
        "UPDATE memory_atoms SET state = 'superseded', superseded_by = ?, state_time = ?,"
        " update_time = ? WHERE state = 'active' AND persona_id IS ? AND subject = ?"
        " AND attribute = ? AND value != ? AND id != ?",
        (new_id, now, now, owner.persona_id, row.subject, row.attribute, row.value, new_id)).rowcount


def search(conn: sqlite3.Connection, match: str, persona_id: str | None, session_id: str | None,
           types: Sequence[str] | None, limit: int) -> list[sqlite3.Row]:
    """Active atoms matching an FTS expression, best BM25 first, with raw score (higher is better)."""
    clauses, params = ["a.state = 'active'"], []
    for column, value in (("persona_id", persona_id), ("session_id", session_id)):
        if value is not None:
            clauses.append(f"a.{column} = ?")
            params.append(value)
    if types:
        clauses.append(f"a.type IN ({','.join('?' * len(types))})")
        params.extend(types)
    return conn.execute(
        "SELECT a.*, -bm25(atoms_fts) AS raw FROM atoms_fts JOIN memory_atoms a ON a.id = atoms_fts.rowid"
        f" WHERE atoms_fts MATCH ? AND {' AND '.join(clauses)} ORDER BY raw DESC LIMIT ?",
        (match, *params, limit)).fetchall()


def time_factor(row, now: float) -> float:
    """How valid an atom row still is: its type's curve over the age since it was last
    (re)confirmed, or its deadline for a plan."""
    to_deadline = None if row["deadline"] is None else (row["deadline"] - now) / DAY
    age = (now - (row["state_time"] or row["create_time"])) / DAY
    return atom_time_factor(row["type"], age, row["ttl_days"], to_deadline)


def expire(conn: sqlite3.Connection, now: float) -> list[int]:
    """Active atoms past their deadline or their shelf life become expired; return their ids."""
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM memory_atoms WHERE state = 'active' AND ("
        " (deadline IS NOT NULL AND deadline < ?) OR"
        " (deadline IS NULL AND ttl_days IS NOT NULL AND COALESCE(state_time, create_time) + ttl_days * ? < ?))",
        (now, DAY, now))]
    _set_state(conn, ids, "expired", now)
    return ids


def forget(conn: sqlite3.Connection, expired_before: float, now: float) -> list[int]:
    """Expired long enough: forgotten — out of the full-text index, the row kept."""
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM memory_atoms WHERE state = 'expired' AND state_time < ?", (expired_before,))]
    _set_state(conn, ids, "forgotten", now)
    conn.executemany("DELETE FROM atoms_fts WHERE rowid = ?", [(i,) for i in ids])
    return ids


def purge(conn: sqlite3.Connection, forgotten_before: float, now: float) -> list[sqlite3.Row]:
    """Forgotten long enough: purged. Returns the rows (their graph output goes too)."""
    rows = conn.execute(
        "SELECT * FROM memory_atoms WHERE state = 'forgotten' AND state_time < ?", (forgotten_before,)).fetchall()
    _set_state(conn, [r["id"] for r in rows], "purged", now)
    return rows


def _set_state(conn: sqlite3.Connection, ids: list[int], state: str, now: float) -> None:
    conn.executemany("UPDATE memory_atoms SET state = ?, state_time = ?, update_time = ? WHERE id = ?",
                     [(state, now, now, i) for i in ids])
    if ids:
        runtime.bump_epoch(conn)


def temporal_factors(conn: sqlite3.Connection, memory_ids: list[int], now: float) -> dict[int, float]:
    """Per memory that has atoms: the time factor of its most valid atom (an atom that is no
    longer active counts 0). Memories without atoms are left out (factor 1)."""
    if not memory_ids:
        return {}
    rows = conn.execute(
        "SELECT memory_id, type, state, ttl_days, deadline, create_time, state_time FROM memory_atoms"
        " WHERE memory_id IN (SELECT value FROM json_each(?))", (json.dumps(memory_ids),)).fetchall()
    factors: dict[int, float] = {}
    for row in rows:
        factor = time_factor(row, now) if row["state"] == "active" else 0.0
        factors[row["memory_id"]] = max(factor, factors.get(row["memory_id"], 0.0))
    return factors


def delete_for_memory(conn: sqlite3.Connection, memory_id: int, now: float) -> dict[str, int]:
    """Remove a memory's atoms and their FTS rows; return {table: rows removed}."""
    fts = conn.execute(
        "DELETE FROM atoms_fts WHERE rowid IN (SELECT id FROM memory_atoms WHERE memory_id = ?)",
        (memory_id,)).rowcount
    atoms = conn.execute("DELETE FROM memory_atoms WHERE memory_id = ?", (memory_id,)).rowcount
    return {"memory_atoms": atoms, "atoms_fts": fts}


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {
        "memory_atoms": conn.execute("SELECT COUNT(*) FROM memory_atoms").fetchone()[0],
        "atoms_fts": conn.execute("SELECT COUNT(*) FROM atoms_fts").fetchone()[0],
    }
