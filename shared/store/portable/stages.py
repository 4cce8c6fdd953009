"""The per-memory stage journal: the truth about what each memory still needs.

A memory's follow-up work (embed, atoms, graph) is a row per stage with status, attempts, a
lease and the content hash it is for. The queue only carries hints; these rows survive any
crash and the reconciler re-enqueues from them.

Every attempt is counted when it is claimed, and every attempt ends on the row: done, failed
with its error (then pending after a backoff, or failed for good after max attempts), or
reclaimed when its lease ran out or its worker died (also recorded, and also failed for good
once the attempts are used up). So no stage loops forever.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from shared.store.model.stages import DEPENDS_ON, FAILED, PENDING, STAGES, STATUSES, StageKey, dependents
from shared.store.portable.connection import Connection


def _names(stages: Iterable[str]) -> str:
    """Stage names as an SQL list: 'atoms', 'embed' (fixed identifiers, never user input)."""
    return ", ".join(f"'{stage}'" for stage in stages)


# Claimable only when every stage it depends on is done for the same content version.
_DEPENDENCY_MET = (
    "NOT EXISTS (SELECT 1 FROM memory_stages d WHERE d.memory_id = memory_stages.memory_id AND ("
    + " OR ".join(f"(memory_stages.stage = '{later}' AND d.stage IN ({_names(earlier)}))"
                  for later, earlier in DEPENDS_ON.items())
    + ") AND (d.status != 'done' OR d.content_hash != memory_stages.content_hash))")


# New and edited memories are journalled as already enqueued: the front queues them right
# after its commit (one write instead of two). If that enqueue fails or the front dies first,
# the reconciler queues them again once the queue has drained.


def create_for_memory(conn: Connection, memory_id: int, content_hash: str, now: float) -> None:
    """Journal every stage of a new memory as pending (inside the document's transaction)."""
    conn.executemany(
        "INSERT INTO memory_stages (memory_id, stage, content_hash, enqueued_time, update_time)"
        " VALUES (?, ?, ?, ?, ?)",
        [(memory_id, stage, content_hash, now, now) for stage in STAGES])


def reset_for_memory(conn: Connection, memory_id: int, content_hash: str, now: float) -> None:
    """After an edit of the content: every stage must run again for the new content.
    One row of VALUES per stage: the statement runs as it is on SQLite and PostgreSQL."""
    conn.execute(
        "INSERT INTO memory_stages (memory_id, stage, content_hash, enqueued_time, update_time)"
        " VALUES " + ", ".join(["(?, ?, ?, ?, ?)"] * len(STAGES)) +
        " ON CONFLICT (memory_id, stage) DO UPDATE SET status = 'pending', content_hash = excluded.content_hash,"
        " attempts = 0, lease_owner = NULL, lease_until = NULL, next_attempt_time = NULL,"
        " enqueued_time = excluded.enqueued_time, last_error = NULL, update_time = excluded.update_time",
        [value for stage in STAGES for value in (memory_id, stage, content_hash, now, now)])


# A retry message may arrive a moment before its backoff ends (scheduler granularity).
_EARLY_TOLERANCE_S = 1.0


def claim(conn: Connection, key: StageKey, owner: str, now: float, lease_s: float) -> bool:
    """Lease a due pending stage of this content version; False if done, gone, edited,
    leased elsewhere or still backing off."""
    cur = conn.execute(
        "UPDATE memory_stages SET status = 'running', lease_owner = ?, lease_until = ?,"
        " attempts = attempts + 1, update_time = ? WHERE memory_id = ? AND stage = ?"
        " AND content_hash = ? AND status = 'pending'"
        f" AND (next_attempt_time IS NULL OR next_attempt_time <= ?) AND {_DEPENDENCY_MET}",
        (owner, now + lease_s, now, key.memory_id, key.stage, key.content_hash,
         now + _EARLY_TOLERANCE_S))
    return cur.rowcount == 1


def claim_more(conn: Connection, stage: str, owner: str, now: float, lease_s: float,
               limit: int) -> list[StageKey]:
    """Lease up to `limit` other ready pending rows of a stage, oldest first (for batching)."""
    rows = conn.execute(
        "SELECT memory_id, content_hash FROM memory_stages WHERE stage = ? AND status = 'pending'"
        f" AND (next_attempt_time IS NULL OR next_attempt_time <= ?) AND {_DEPENDENCY_MET}"
        " ORDER BY memory_id LIMIT ?",
        (stage, now, limit)).fetchall()
    keys = [StageKey(r[0], stage, r[1]) for r in rows]
    return [k for k in keys if claim(conn, k, owner, now, lease_s)]


def complete(conn: Connection, key: StageKey, owner: str, now: float) -> bool:
    """Mark a leased stage done; False if the lease was lost or the content changed meanwhile."""
    cur = conn.execute(
        "UPDATE memory_stages SET status = 'done', lease_owner = NULL, lease_until = NULL,"
        " last_error = NULL, next_attempt_time = NULL, update_time = ?"
        " WHERE memory_id = ? AND stage = ? AND content_hash = ? AND status = 'running'"
        " AND lease_owner = ?",
        (now, key.memory_id, key.stage, key.content_hash, owner))
    if cur.rowcount != 1:
        return False
    # What a later stage made from this stage's previous output is stale: it runs again, unless
    # another stage it reads failed for good (it would wait forever; it stays failed with it).
    for later in dependents(key.stage):
        others = [stage for stage in DEPENDS_ON[later] if stage != key.stage]
        unblocked = (" AND NOT EXISTS (SELECT 1 FROM memory_stages o WHERE o.memory_id = memory_stages.memory_id"
                     f" AND o.stage IN ({_names(others)}) AND o.status = 'failed')") if others else ""
        conn.execute(
            "UPDATE memory_stages SET status = 'pending', attempts = 0, next_attempt_time = NULL,"
            " lease_owner = NULL, lease_until = NULL, enqueued_time = NULL, last_error = NULL,"
            " update_time = ? WHERE memory_id = ? AND stage = ? AND content_hash = ?"
            f" AND status IN ('done', 'failed'){unblocked}", (now, key.memory_id, later, key.content_hash))
    return True


def fail(conn: Connection, key: StageKey, owner: str, error: str, now: float,
         max_attempts: int, retry_delay: Callable[[int], float]) -> float | None:
    """Record a failed attempt: pending again after a backoff, or failed for good.

    Returns the backoff in seconds when the stage will be retried, else None."""
    row = conn.execute(
        "SELECT attempts FROM memory_stages WHERE memory_id = ? AND stage = ? AND content_hash = ?"
        " AND status = 'running' AND lease_owner = ?",
        (key.memory_id, key.stage, key.content_hash, owner)).fetchone()
    if row is None:
        return None
    status = FAILED if row[0] >= max_attempts else PENDING
    delay = retry_delay(row[0])
    conn.execute(
        "UPDATE memory_stages SET status = ?, lease_owner = NULL, lease_until = NULL, last_error = ?,"
        " next_attempt_time = ?, enqueued_time = ?, update_time = ? WHERE memory_id = ? AND stage = ?",
        (status, error[:2000], now + delay, now, now, key.memory_id, key.stage))
    if status == FAILED:
        _fail_dependents(conn, key.memory_id, key.stage, now)
    return delay if status == PENDING else None


def _fail_dependents(conn: Connection, memory_id: int, stage: str, now: float) -> None:
    """Stages waiting for one that failed for good fail too (repair --apply retries all)."""
    for later in dependents(stage):
        conn.execute(
            "UPDATE memory_stages SET status = 'failed', last_error = ?, update_time = ?"
            " WHERE memory_id = ? AND stage = ? AND status = 'pending'",
            (f"waits for the {stage} stage, which failed", now, memory_id, later))


def mark_enqueued(conn: Connection, keys: Iterable[StageKey], now: float | None) -> None:
    """Record that messages were queued (now) or that queueing failed (None)."""
    conn.executemany(
        "UPDATE memory_stages SET enqueued_time = ? WHERE memory_id = ? AND stage = ? AND content_hash = ?",
        [(now, k.memory_id, k.stage, k.content_hash) for k in keys])


def reclaim_abandoned(conn: Connection, now: float, live_owners: Sequence[str],
                      max_attempts: int) -> tuple[int, int]:
    """Running stages whose lease ran out or whose worker is dead: pending again, or failed
    for good once they have used max_attempts. Return (pending again, failed)."""
    # "1 = 1", not "1": PostgreSQL wants a boolean after OR.
    dead_owner = f"lease_owner NOT IN ({','.join('?' * len(live_owners))})" if live_owners else "1 = 1"
    rows = conn.execute(
        "SELECT memory_id, stage, attempts, last_error FROM memory_stages WHERE status = 'running'"
        f" AND (lease_until IS NULL OR lease_until < ? OR lease_owner IS NULL OR {dead_owner})",
        (now, *live_owners)).fetchall()
    updates = [(FAILED if attempts >= max_attempts else PENDING,
                lease_error(_lease_expiries(last_error) + 1), now, memory_id, stage)
               for memory_id, stage, attempts, last_error in rows]
    conn.executemany(
        "UPDATE memory_stages SET status = ?, lease_owner = NULL, lease_until = NULL,"
        " next_attempt_time = NULL, enqueued_time = NULL, last_error = ?, update_time = ?"
        " WHERE memory_id = ? AND stage = ?", updates)
    for status, _, _, memory_id, stage in updates:
        if status == FAILED:
            _fail_dependents(conn, memory_id, stage, now)
    failed = sum(1 for u in updates if u[0] == FAILED)
    return len(updates) - failed, failed


_LEASE_ERROR = "lease expired "


def lease_error(times: int) -> str:
    """The error kept on a stage reclaimed from a killed or stuck worker."""
    return f"{_LEASE_ERROR}{times} time{'s' if times > 1 else ''} (worker killed or stuck)"


def _lease_expiries(last_error: str | None) -> int:
    """How many times in a row the lease ran out, read back from lease_error()'s text (the
    count needs no column of its own: any other error in between starts it again)."""
    if not last_error or not last_error.startswith(_LEASE_ERROR):
        return 0
    count = last_error[len(_LEASE_ERROR):].split(" ", 1)[0]
    return int(count) if count.isdigit() else 0


def ready_to_enqueue(conn: Connection, now: float, include_enqueued: bool,
                     limit: int = 10_000) -> list[StageKey]:
    """Pending stages due now that nothing has queued (or all of them, when the queue is empty)."""
    extra = "" if include_enqueued else " AND enqueued_time IS NULL"
    rows = conn.execute(
        "SELECT memory_id, stage, content_hash FROM memory_stages WHERE status = 'pending'"
        f" AND (next_attempt_time IS NULL OR next_attempt_time <= ?){extra} ORDER BY memory_id LIMIT ?",
        (now, limit)).fetchall()
    return [StageKey(*r) for r in rows]


def restart_stage(conn: Connection, stage: str, now: float) -> int:
    """Every row of a stage back to pending with fresh attempts (e.g. re-embed everything)."""
    return conn.execute(
        "UPDATE memory_stages SET status = 'pending', attempts = 0, next_attempt_time = NULL,"
        " lease_owner = NULL, lease_until = NULL, enqueued_time = NULL, last_error = NULL,"
        " update_time = ? WHERE stage = ?", (now, stage)).rowcount


def restart(conn: Connection, memory_id: int, stage: str, content_hash: str, now: float) -> None:
    """One stage of one memory back to pending with fresh attempts (its output is missing)."""
    conn.execute(
        "INSERT INTO memory_stages (memory_id, stage, content_hash, update_time) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (memory_id, stage) DO UPDATE SET status = 'pending', attempts = 0,"
        " content_hash = excluded.content_hash, next_attempt_time = NULL, lease_owner = NULL,"
        " lease_until = NULL, enqueued_time = NULL, last_error = NULL, update_time = excluded.update_time",
        (memory_id, stage, content_hash, now))


def retry_failed(conn: Connection, now: float) -> int:
    """Give every failed stage a fresh set of attempts (aokun repair --apply)."""
    return conn.execute(
        "UPDATE memory_stages SET status = 'pending', attempts = 0, next_attempt_time = NULL,"
        " enqueued_time = NULL, update_time = ? WHERE status = 'failed'", (now,)).rowcount


# A running stage whose lease has run out (or that has none) is stuck: its worker was killed
# or hangs. The reconciler takes it back; until then it is reported.
_STUCK = "status = 'running' AND (lease_until IS NULL OR lease_until < ?)"


def queue_figures(conn: Connection, now: float) -> dict[str, Any]:
    """Counts by status from the stage rows, the age of the oldest pending one, and the
    stages in trouble: stuck (running, lease expired) and retrying (pending after a failure)."""
    counts = dict(conn.execute("SELECT status, COUNT(*) FROM memory_stages GROUP BY status").fetchall())
    oldest = conn.execute("SELECT MIN(update_time) FROM memory_stages WHERE status = 'pending'").fetchone()[0]
    stuck = conn.execute(f"SELECT COUNT(*) FROM memory_stages WHERE {_STUCK}", (now,)).fetchone()[0]
    retrying = conn.execute(
        "SELECT COUNT(*) FROM memory_stages WHERE status = 'pending' AND attempts > 0").fetchone()[0]
    return {**{status: counts.get(status, 0) for status in STATUSES},
            "oldest_pending_age_s": round(now - oldest, 1) if oldest is not None else 0.0,
            "stuck": stuck, "retrying": retrying}


def waiting_by_stage(conn: Connection) -> dict[str, int]:
    """{stage: rows not done yet (pending or running)}, every stage named."""
    counts = dict(conn.execute("SELECT stage, COUNT(*) FROM memory_stages WHERE status IN ('pending', 'running')"
                               " GROUP BY stage").fetchall())
    return {stage: counts.get(stage, 0) for stage in STAGES}


def done_since(conn: Connection, stage: str, since: float) -> int:
    """Rows of `stage` done at or after `since` (a done row's update_time is when it was
    completed): the recent pace of that stage."""
    return conn.execute("SELECT COUNT(*) FROM memory_stages WHERE stage = ? AND status = 'done'"
                        " AND update_time >= ?", (stage, since)).fetchone()[0]


def failed_stages(conn: Connection, limit: int = 50) -> list[Any]:
    """(memory_id, stage, attempts, last_error) of failed stages, for doctor and repair."""
    return conn.execute(
        "SELECT memory_id, stage, attempts, last_error FROM memory_stages WHERE status = 'failed'"
        " ORDER BY memory_id LIMIT ?", (limit,)).fetchall()


def stage_problems(conn: Connection, now: float, limit: int = 50) -> list[dict[str, Any]]:
    """Failed and stuck stages, oldest first: {memory_id, stage, status ('failed' | 'stuck'),
    attempts, last_error, age_s}. A stuck stage's last_error says whose lease ran out when
    (and the error of its previous attempt, if any); age_s is the time since it failed or
    since its lease ran out."""
    rows = conn.execute(
        "SELECT memory_id, stage, status, attempts, last_error, lease_owner, lease_until, update_time"
        f" FROM memory_stages WHERE status = 'failed' OR ({_STUCK})"
        " ORDER BY COALESCE(lease_until, update_time), memory_id LIMIT ?", (now, limit)).fetchall()
    return [_problem(tuple(row), now) for row in rows]


def _problem(row: tuple[Any, ...], now: float) -> dict[str, Any]:
    memory_id, stage, status, attempts, last_error, owner, lease_until, update_time = row
    if status == FAILED:
        return {"memory_id": memory_id, "stage": stage, "status": FAILED, "attempts": attempts,
                "last_error": last_error, "age_s": round(now - update_time, 1)}
    since = lease_until if lease_until is not None else update_time
    detail = f"lease held by {owner or 'nobody'} expired {now - since:.0f} s ago"
    if last_error:
        detail += f"; previous attempt: {last_error}"
    return {"memory_id": memory_id, "stage": stage, "status": "stuck", "attempts": attempts,
            "last_error": detail, "age_s": round(now - since, 1)}


def delete_for_memory(conn: Connection, memory_id: int, now: float) -> dict[str, int]:
    """Remove a memory's stage rows; return {table: rows removed}."""
    cur = conn.execute("DELETE FROM memory_stages WHERE memory_id = ?", (memory_id,))
    return {"memory_stages": cur.rowcount}


def is_done(conn: Connection, memory_id: int, stage: str, content_hash: str) -> bool:
    """Whether a stage has finished for this version of a memory's content."""
    return conn.execute(
        "SELECT 1 FROM memory_stages WHERE memory_id = ? AND stage = ? AND content_hash = ?"
        " AND status = 'done'", (memory_id, stage, content_hash)).fetchone() is not None


def retrying_stages(conn: Connection, now: float, limit: int = 50) -> list[dict[str, Any]]:
    """Stages pending again after a failed attempt, soonest retry first (the panel's queue
    page): {memory_id, stage, attempts, last_error, retry_in_s} (0 once the backoff is over)."""
    rows = conn.execute(
        "SELECT memory_id, stage, attempts, last_error, next_attempt_time FROM memory_stages"
        " WHERE status = 'pending' AND attempts > 0"
        # Reclaimed rows (no next attempt time) first, as SQLite sorts NULLs; PostgreSQL
        # sorts them last unless told.
        " ORDER BY next_attempt_time IS NOT NULL, next_attempt_time, memory_id LIMIT ?",
        (limit,)).fetchall()
    return [{"memory_id": r[0], "stage": r[1], "attempts": r[2], "last_error": r[3],
             "retry_in_s": round(max(0.0, (r[4] or now) - now), 1)} for r in rows]


def of_memory(conn: Connection, memory_id: int) -> list[Any]:
    """A memory's stage rows in run order (the panel's memory page): stage, status, attempts,
    last_error, next_attempt_time, lease_until, update_time, content_hash."""
    order = " ".join(f"WHEN '{stage}' THEN {i}" for i, stage in enumerate(STAGES))
    return conn.execute(
        "SELECT stage, status, attempts, last_error, next_attempt_time, lease_until, update_time,"
        f" content_hash FROM memory_stages WHERE memory_id = ? ORDER BY CASE stage {order} END",
        (memory_id,)).fetchall()
