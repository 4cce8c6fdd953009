"""Memory atoms: typed facts with a shelf life, and their full-text index."""

from __future__ import annotations

import json
import sqlite3

from shared.decay import DAY, atom_time_factor

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


def temporal_factors(conn: sqlite3.Connection, memory_ids: list[int], now: float) -> dict[int, float]:
    """Per memory that has atoms: the time factor of its most valid atom (an atom that is no
    longer active counts 0). Memories without atoms are left out (factor 1)."""
    if not memory_ids:
        return {}
    rows = conn.execute(
        "SELECT memory_id, type, state, ttl_days, deadline, create_time FROM memory_atoms"
        " WHERE memory_id IN (SELECT value FROM json_each(?))", (json.dumps(memory_ids),)).fetchall()
    factors: dict[int, float] = {}
    for memory_id, atom_type, state, ttl_days, deadline, created in rows:
        factor = 0.0
        if state == "active":
            to_deadline = None if deadline is None else (deadline - now) / DAY
            factor = atom_time_factor(atom_type, (now - created) / DAY, ttl_days, to_deadline)
        factors[memory_id] = max(factor, factors.get(memory_id, 0.0))
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
