"""Process bookkeeping shared by front and workers: counters, heartbeats, periodic runs."""

from __future__ import annotations

DDL = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID",
    """
    CREATE TABLE workers (
        worker_id TEXT PRIMARY KEY,
        pid INTEGER NOT NULL,
        hostname TEXT NOT NULL,
        started_time REAL NOT NULL,
        heartbeat_time REAL NOT NULL
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE periodic_runs (
        name TEXT PRIMARY KEY,
        last_run_time REAL NOT NULL
    ) WITHOUT ROWID
    """,
]
