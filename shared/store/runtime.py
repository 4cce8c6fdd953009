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


def beat(conn, worker_id: str, pid: int, hostname: str, now: float) -> None:
    """Record that a worker is alive (insert on first beat)."""
    conn.execute(
        "INSERT INTO workers (worker_id, pid, hostname, started_time, heartbeat_time)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (worker_id) DO UPDATE SET heartbeat_time = excluded.heartbeat_time",
        (worker_id, pid, hostname, now, now))


def remove_worker(conn, worker_id: str) -> None:
    conn.execute("DELETE FROM workers WHERE worker_id = ?", (worker_id,))


def newest_heartbeat(conn) -> float | None:
    """Time of the most recent heartbeat of any worker, or None if none ever beat."""
    return conn.execute("SELECT MAX(heartbeat_time) FROM workers").fetchone()[0]
