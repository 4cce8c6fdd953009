"""The reconciler: makes the queue agree with the stage rows after any crash.

Runs when a worker starts, when a front starts, and periodically. Stages leased by a dead
worker (or whose lease ran out) become pending — or failed, once they have used
queue.max_retries attempts, so a job that kills or hangs its worker every time ends; pending
stages that nothing has queued are queued. When the queue is empty, every due pending stage is
queued again: a message can be lost (Huey deletes a task before running it), a stage row cannot.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from shared.config import QueueConfig
from shared.store.interface import Store
from shared.tasks import Enqueuer

log = logging.getLogger("aokun.reconcile")

# Per run, at most this many per-memory messages; a larger backlog is drained in batches.
MAX_MESSAGES = 1000


@dataclass(frozen=True)
class ReconcileReport:
    reclaimed: int
    enqueued: int
    failed: int = 0
    """Stages taken back from a dead or stuck worker that had no attempts left."""


def reconcile(store: Store, enqueuer: Enqueuer, heartbeat_timeout_s: float,
              now: float | None = None, queue: QueueConfig = QueueConfig()) -> ReconcileReport:
    """Reclaim abandoned stages and queue every pending stage that has no message."""
    now = time.time() if now is None else now
    with store.write() as tx:
        live = tx.runtime.live_workers(now - heartbeat_timeout_s)
        reclaimed, failed = tx.stages.reclaim_abandoned(now, live, queue.max_retries)
    if failed:
        log.warning("%d stage(s) failed for good: all %d attempts used, the last one's lease ran"
                    " out (worker killed or stuck); see `aokun doctor`", failed, queue.max_retries)
    queue_empty = enqueuer.pending_count() == 0
    keys = store.stages.ready_to_enqueue(now, include_enqueued=queue_empty, limit=MAX_MESSAGES)
    if keys:
        enqueuer.enqueue(keys)
        with store.write() as tx:
            tx.stages.mark_enqueued(keys, now)
    if len(keys) >= MAX_MESSAGES:
        # A big backlog: drain messages work through the rest in batches, chaining themselves.
        for stage in sorted({k.stage for k in keys}):
            enqueuer.drain(stage)
    if reclaimed or keys:
        log.info("reconciled: %d stage(s) reclaimed, %d queued", reclaimed, len(keys))
    return ReconcileReport(reclaimed=reclaimed, enqueued=len(keys), failed=failed)
