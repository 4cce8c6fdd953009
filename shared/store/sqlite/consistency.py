"""Consistency on SQLite: the checks of its FTS5 rows, and every table's rows counted in one read."""

from __future__ import annotations

import sqlite3

from shared.store.portable.consistency import ATOM_SEARCH_ROWS, CHECKS
from shared.store.sqlite import atoms, documents, graph, stages, vectors
from shared.store.sqlite.db import Database

_ATOM_SEARCH_SQL = ("SELECT a.memory_id FROM memory_atoms a WHERE a.state IN ('active', 'expired', 'superseded')"
                    " AND NOT EXISTS (SELECT 1 FROM atoms_fts f WHERE f.rowid = a.id)")


def missing_outputs(conn: sqlite3.Connection, model: str) -> dict[str, list[int]]:
    """{what is missing: memory ids} for every check."""
    checks = {**{name: sql for name, (_, sql) in CHECKS.items()}, ATOM_SEARCH_ROWS: _ATOM_SEARCH_SQL}
    return {name: sorted({r[0] for r in conn.execute(sql, {"model": model})}) for name, sql in checks.items()}


def all_table_counts(db: Database) -> dict[str, int]:
    """Rows per table, in one consistent read (memory_stats, doctor)."""
    with db.snapshot() as conn:
        counts = documents.table_counts(conn)
        for owner in (stages, atoms, graph, vectors):
            counts.update(owner.table_counts(conn))
    return counts
