"""Process bookkeeping shared by front and workers: counters, heartbeats, periodic runs."""

from __future__ import annotations

import os
import socket

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


def live_workers(conn, alive_since: float) -> list[str]:
    """Ids of workers whose heartbeat is newer than alive_since and, when they run on this
    host, whose process still exists (a worker killed a second ago is dead at once)."""
    here = socket.gethostname()
    rows = conn.execute("SELECT worker_id, pid, hostname FROM workers WHERE heartbeat_time >= ?",
                        (alive_since,)).fetchall()
    return [worker_id for worker_id, pid, host in rows if host != here or _pid_alive(pid)]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    # A killed child not yet reaped by its parent still answers kill(0) on Linux.
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return True


def prune_workers(conn, dead_before: float) -> int:
    """Forget workers that have not beaten since dead_before (killed, never said goodbye)."""
    return conn.execute("DELETE FROM workers WHERE heartbeat_time < ?", (dead_before,)).rowcount


def claim_periodic(conn, name: str, interval_s: float, now: float) -> tuple[bool, float | None]:
    """If job `name` is due, record this run and return (True, previous run time or None).

    A compare-and-set inside the caller's write transaction, so among several workers
    exactly one runs each due occurrence.
    """
    row = conn.execute("SELECT last_run_time FROM periodic_runs WHERE name = ?", (name,)).fetchone()
    previous = row[0] if row else None
    if previous is not None and now - previous < interval_s:
        return False, previous
    conn.execute("INSERT INTO periodic_runs (name, last_run_time) VALUES (?, ?)"
                 " ON CONFLICT (name) DO UPDATE SET last_run_time = excluded.last_run_time",
                 (name, now))
    return True, previous


def restore_periodic(conn, name: str, previous: float | None) -> None:
    """Undo a claim whose run failed, so the job is due again."""
    if previous is None:
        conn.execute("DELETE FROM periodic_runs WHERE name = ?", (name,))
    else:
        conn.execute("UPDATE periodic_runs SET last_run_time = ? WHERE name = ?", (previous, name))


def periodic_runs(conn) -> dict[str, float]:
    return dict(conn.execute("SELECT name, last_run_time FROM periodic_runs").fetchall())


EPOCH_KEY = "write_epoch"


def bump_epoch(conn) -> None:
    """Note a change that recall results depend on (call inside the write transaction)."""
    conn.execute("INSERT INTO meta (key, value) VALUES (?, 1)"
                 " ON CONFLICT (key) DO UPDATE SET value = value + 1", (EPOCH_KEY,))


def recall_epoch(conn) -> int:
    """Changes whenever any process changes what recall can return: document writes bump
    write_epoch, vector writes bump vector_seq; both only grow, so their sum does too."""
    return conn.execute("SELECT COALESCE(SUM(value), 0) FROM meta WHERE key IN (?, 'vector_seq')",
                        (EPOCH_KEY,)).fetchone()[0]
