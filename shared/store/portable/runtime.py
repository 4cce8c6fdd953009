"""Process bookkeeping shared by fronts and workers: heartbeats and periodic runs.

Liveness is a heartbeat newer than a cut-off and, for a process on this host, a pid that
still exists: a process killed a second ago is dead at once, whatever its last beat says.

A worker's row goes when it stops (or is pruned, long dead); the time it was last seen stays
in meta (workers_last_seen), so "no worker alive since ..." is told from "no worker ever ran".
A front's row holds the endpoint it actually listens on (None for stdio), which is what a
client on this host should reach, whatever the config file says since the front started.
"""

from __future__ import annotations

import socket
import time

from shared.platform import pid_alive
from shared.store.model.meta import WORKERS_LAST_SEEN
from shared.store.model.runtime import ProcessRow
from shared.store.portable import meta
from shared.store.portable.connection import Connection

# -- workers -------------------------------------------------------------------------------

def beat(conn: Connection, worker_id: str, pid: int, hostname: str, now: float) -> None:
    """Record that a worker is alive (insert on first beat)."""
    conn.execute(
        "INSERT INTO workers (worker_id, pid, hostname, started_time, heartbeat_time)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (worker_id) DO UPDATE SET heartbeat_time = excluded.heartbeat_time",
        (worker_id, pid, hostname, now, now))


def mark_autostarted(conn: Connection, worker_id: str) -> None:
    """Note that a front started this worker (it may exit when idle); after its first beat."""
    conn.execute("UPDATE workers SET autostarted = 1 WHERE worker_id = ?", (worker_id,))


def mark_stopping(conn: Connection, worker_id: str) -> None:
    """From now on the worker counts as gone, though it still beats while it winds down: a
    front starting meanwhile starts a new worker instead of relying on this one."""
    conn.execute("UPDATE workers SET stopping = 1 WHERE worker_id = ?", (worker_id,))


def remove_worker(conn: Connection, worker_id: str) -> None:
    """The worker stopped: its row goes, the time stays as when a worker was last seen."""
    if conn.execute("DELETE FROM workers WHERE worker_id = ?", (worker_id,)).rowcount:
        _seen(conn, time.time())


def _seen(conn: Connection, when: float) -> None:
    """Keep `when` as the last time a worker was seen, unless a later one is kept already."""
    kept = meta.get(conn, WORKERS_LAST_SEEN)
    if kept is None or when > kept:
        meta.put(conn, WORKERS_LAST_SEEN, when)


def newest_heartbeat(conn: Connection) -> float | None:
    """Time of the most recent heartbeat of any worker, those stopped or pruned since
    included, or None if no worker ever beat on this store."""
    beat = conn.execute("SELECT MAX(heartbeat_time) FROM workers").fetchone()[0]
    gone = last_worker_gone(conn)
    return max((t for t in (beat, gone) if t is not None), default=None)


def last_worker_gone(conn: Connection) -> float | None:
    """When the last worker whose row is gone (stopped, or pruned long dead) was last seen;
    None if none ever went."""
    return meta.get(conn, WORKERS_LAST_SEEN)


def worker_rows(conn: Connection) -> list[ProcessRow]:
    """Every worker row, newest start first, alive or not."""
    rows = conn.execute(
        "SELECT worker_id, pid, hostname, CASE autostarted WHEN 1 THEN 'autostarted' ELSE 'manual' END,"
        " started_time, heartbeat_time, stopping FROM workers ORDER BY started_time DESC").fetchall()
    return [ProcessRow(*row[:6], stopping=bool(row[6])) for row in rows]


def live_workers(conn: Connection, alive_since: float) -> list[str]:
    """Ids of workers alive: beat since alive_since, process present if on this host, not
    winding down."""
    return [row.id for row in worker_rows(conn) if row.alive(alive_since)]


def prune_workers(conn: Connection, dead_before: float) -> int:
    """Forget workers that have not beaten since dead_before (killed, never said goodbye);
    their last heartbeat is kept as when a worker was last seen."""
    last = conn.execute("SELECT MAX(heartbeat_time) FROM workers WHERE heartbeat_time < ?",
                        (dead_before,)).fetchone()[0]
    if last is None:
        return 0
    _seen(conn, last)
    return conn.execute("DELETE FROM workers WHERE heartbeat_time < ?", (dead_before,)).rowcount


# -- fronts --------------------------------------------------------------------------------

def front_beat(conn: Connection, front_id: str, pid: int, hostname: str, transport: str, now: float,
               endpoint: str | None = None) -> None:
    """Record that a front is alive (insert on first beat), and where it listens (an HTTP
    front's URL; None over stdio)."""
    conn.execute(
        "INSERT INTO fronts (front_id, pid, hostname, transport, started_time, heartbeat_time, endpoint)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (front_id) DO UPDATE SET heartbeat_time = excluded.heartbeat_time",
        (front_id, pid, hostname, transport, now, now, endpoint))


def remove_front(conn: Connection, front_id: str) -> None:
    conn.execute("DELETE FROM fronts WHERE front_id = ?", (front_id,))


def front_rows(conn: Connection) -> list[ProcessRow]:
    """Every front row, newest start first, alive or not."""
    rows = conn.execute("SELECT front_id, pid, hostname, transport, started_time, heartbeat_time,"
                        " endpoint FROM fronts ORDER BY started_time DESC").fetchall()
    return [ProcessRow(*row[:6], endpoint=row[6]) for row in rows]


def live_fronts(conn: Connection, alive_since: float) -> list[ProcessRow]:
    return [row for row in front_rows(conn) if row.alive(alive_since)]


def prune_fronts(conn: Connection, dead_before: float) -> int:
    """Forget fronts that have not beaten since dead_before (killed, never said goodbye)."""
    return conn.execute("DELETE FROM fronts WHERE heartbeat_time < ?", (dead_before,)).rowcount


# -- periodic jobs -------------------------------------------------------------------------

def claim_periodic_run(conn: Connection, name: str, interval_s: float, now: float, owner: str, pid: int,
                       hostname: str, lease_s: float) -> tuple[bool, float | None]:
    """If job `name` is due (its last *finished* run is older than interval_s) and no live
    process holds it, claim it for `owner` and return (True, last finished run or None).

    The claim is not the run: nothing is recorded as run until finish_periodic_run. A claim
    held by a process that is gone (on this host, its pid no longer exists) or whose lease
    has passed is taken over, so a run cut off by kill -9 runs again at the next start.
    A compare-and-set inside the caller's write transaction: among concurrent claimers of
    one due run exactly one gets True.
    """
    row = conn.execute("SELECT last_run_time FROM periodic_runs WHERE name = ?", (name,)).fetchone()
    previous = row[0] if row else None
    if previous is not None and now - previous < interval_s:
        return False, previous
    held = conn.execute("SELECT owner, pid, hostname, lease_until FROM periodic_claims WHERE name = ?",
                        (name,)).fetchone()
    if held is not None and held[0] != owner and held[3] >= now \
            and (held[2] != socket.gethostname() or pid_alive(held[1])):
        return False, previous  # another live process is running it
    conn.execute("INSERT INTO periodic_claims (name, owner, pid, hostname, claimed_time, lease_until)"
                 " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner,"
                 " pid = excluded.pid, hostname = excluded.hostname,"
                 " claimed_time = excluded.claimed_time, lease_until = excluded.lease_until",
                 (name, owner, pid, hostname, now, now + lease_s))
    return True, previous


def finish_periodic_run(conn: Connection, name: str, owner: str, started: float) -> None:
    """The claimed run finished: it becomes the job's last run (at the time it started, the
    `now` it was given), and the claim is let go."""
    conn.execute("INSERT INTO periodic_runs (name, last_run_time) VALUES (?, ?)"
                 " ON CONFLICT (name) DO UPDATE SET last_run_time = excluded.last_run_time",
                 (name, started))
    conn.execute("DELETE FROM periodic_claims WHERE name = ? AND owner = ?", (name, owner))


def renew_periodic_claim(conn: Connection, name: str, owner: str, lease_until: float) -> bool:
    """Extend a claim still held by `owner` (its job is still running); False if it was
    taken over meanwhile."""
    return conn.execute("UPDATE periodic_claims SET lease_until = ? WHERE name = ? AND owner = ?",
                        (lease_until, name, owner)).rowcount == 1


def release_periodic_run(conn: Connection, name: str, owner: str) -> None:
    """The claimed run failed: let the claim go; the job stays due."""
    conn.execute("DELETE FROM periodic_claims WHERE name = ? AND owner = ?", (name, owner))


def periodic_claims(conn: Connection) -> dict[str, str]:
    """Runs under way (or cut off and not yet taken over): job name -> owner."""
    return dict(conn.execute("SELECT name, owner FROM periodic_claims").fetchall())


def periodic_runs(conn: Connection) -> dict[str, float]:
    return dict(conn.execute("SELECT name, last_run_time FROM periodic_runs").fetchall())
