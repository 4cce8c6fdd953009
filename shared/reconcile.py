"""The reconciler: makes the queue agree with the stage rows after any crash.

Runs when a worker starts, when a front starts, and periodically. Stages leased by a dead
worker (or whose lease ran out) become pending; pending stages that nothing has queued are
queued. When the queue is empty, every due pending stage is queued again: a message can be
lost (Huey deletes a task before running it), a stage row cannot.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from shared.store import runtime, stages
from shared.store.db import Database
from shared.tasks import Enqueuer

log = logging.getLogger("aokun.reconcile")

# Per run, at most this many per-memory messages; a larger backlog is drained in batches.
MAX_MESSAGES = 1000


@dataclass(frozen=True)
class ReconcileReport:
    reclaimed: int
    enqueued: int


def reconcile(db: Database, enqueuer: Enqueuer, heartbeat_timeout_s: float,
              now: float | None = None) -> ReconcileReport:
    """Reclaim abandoned stages and queue every pending stage that has no message."""
    now = time.time() if now is None else now
    with db.write() as tx:
        live = runtime.live_workers(tx, now - heartbeat_timeout_s)
        reclaimed = stages.reclaim_abandoned(tx, now, live)
    queue_empty = enqueuer.pending_count() == 0
    keys = stages.ready_to_enqueue(db.connection(), now, include_enqueued=queue_empty,
                                   limit=MAX_MESSAGES)
    if keys:
        enqueuer.enqueue(keys)
        with db.write() as tx:
            stages.mark_enqueued(tx, keys, now)
    if len(keys) >= MAX_MESSAGES:
        # A big backlog: drain messages work through the rest in batches, chaining themselves.
        for stage in sorted({k.stage for k in keys}):
            enqueuer.drain(stage)
    if reclaimed or keys:
        log.info("reconciled: %d stage(s) reclaimed, %d queued", reclaimed, len(keys))
    return ReconcileReport(reclaimed=reclaimed, enqueued=len(keys))
