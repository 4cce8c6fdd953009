"""The autostarted worker's idle exit: a worker a front started stops once no front needs it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from shared.pipeline_warnings import format_age
from shared.repeater import Repeater
from shared.store.interface import Session, Store

log = logging.getLogger("aokun.health")


class IdleExit:
    """For a worker a front started: once no front has been alive for `idle_s` seconds and no
    stage is pending or running, mark this worker as stopping and call `on_idle` (once)."""

    def __init__(self, store: Store, worker_id: str, idle_s: float, alive_s: float,
                 on_idle: Callable[[], None]):
        self.store = store
        self.worker_id = worker_id
        self.idle_s = idle_s
        self.alive_s = alive_s
        self.on_idle = on_idle
        self.last_front_seen = time.time()
        self._repeater = Repeater("idle-exit", max(0.2, min(alive_s, idle_s) / 3), self.check)

    def start(self) -> None:
        self._repeater.start()

    def stop(self) -> None:
        """Stop watching; if the exit has begun, wait until on_idle has returned."""
        self._repeater.stop()

    def check(self) -> bool:
        """Exit if idle; True once on_idle has been called."""
        now = time.time()
        if not self._idle(self.store, now):
            return False
        # Check again and step down in one write transaction: a front that starts now either
        # beat before it (and is seen) or finds this worker stopping and starts another.
        with self.store.write() as tx:
            if not self._idle(tx, now):
                return False
            tx.runtime.mark_stopping(self.worker_id)
        log.info("no front alive for %s and no stage pending: autostarted worker exiting",
                 format_age(now - self.last_front_seen))
        self.on_idle()
        return True

    def _idle(self, s: Session, now: float) -> bool:
        fronts = s.runtime.front_rows()
        if any(row.alive(now - self.alive_s) for row in fronts):
            self.last_front_seen = now
            return False
        # A front that was killed was last alive at its last beat.
        self.last_front_seen = max([self.last_front_seen] + [row.heartbeat_time for row in fronts])
        if now - self.last_front_seen < self.idle_s:
            return False
        queue = s.stages.queue_figures(now)
        return queue["pending"] + queue["running"] == 0
