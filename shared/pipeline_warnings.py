"""Will every stage get done? Warnings over the queue figures, for `aokun status`/`doctor` and
memory_stats, and durations as a person would say them."""

from __future__ import annotations

from shared.units import DAY, HOUR


def pipeline_warnings(queue: dict, live_workers: int, newest_heartbeat: float | None,
                      now: float) -> list[str]:
    """One line per reason the stage rows will not reach 'done' by themselves, or have not.

    `queue` is store.stages.queue_figures(); `newest_heartbeat` the newest heartbeat of any worker
    (None if no worker ever beat on this store)."""
    warnings = []
    waiting = queue.get("pending", 0) + queue.get("running", 0)
    if waiting and not live_workers:
        if newest_heartbeat is None:
            since = "no worker has ever run"
        else:
            since = f"no worker alive for {format_age(now - newest_heartbeat)}"
        warnings.append(f"{_count(waiting, 'stage')} pending, {since}; start aokun-worker "
                        "(or a stdio front with worker.autostart)")
    for figure, what in _TROUBLE:
        if queue.get(figure, 0):
            warnings.append(f"{_count(queue[figure], 'stage')} {what}")
    return warnings


# Stage figures that mean trouble, and what to say about them.
_TROUBLE = (
    ("stuck", "stuck, running past the lease; a live worker takes them back, or run "
              "`aokun maintenance reconcile`"),
    ("retrying", "failed and will be retried; the worker log says why"),
    ("failed", "failed for good; `aokun repair --apply` retries them"),
)


def format_age(seconds: float) -> str:
    """A duration as a person would say it: 40 s, 12 min, 2 h, 3 days."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * HOUR:
        return f"{seconds / HOUR:.0f} h"
    return f"{seconds / DAY:.0f} days"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
