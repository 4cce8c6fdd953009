"""The front's heartbeat row, so workers (and an autostarted worker deciding to exit) can tell
a front is alive, and hook calls where it listens."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid

from shared.logs import log_failure
from shared.repeater import Repeater
from shared.store.interface import Store

log = logging.getLogger("aokun.health")


class FrontHeartbeat:
    """A front's row in `fronts`, fresh every `interval` seconds from start() until stop().

    Start it before looking for a worker: an autostarted worker that decides to exit does so
    in one transaction with its check that no front is alive."""

    def __init__(self, store: Store, interval: float, transport: str, endpoint: str | None = None):
        self.store = store
        self.transport = transport
        self.endpoint = endpoint  # where an HTTP front listens, as bound (not as configured)
        self.front_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._repeater = Repeater("front-heartbeat", interval, self.beat)

    def beat(self) -> bool:
        with self.store.write() as tx:
            tx.runtime.front_beat(self.front_id, os.getpid(), socket.gethostname(), self.transport,
                                  time.time(), self.endpoint)
        return False

    def start(self) -> None:
        try:
            self.beat()
        except Exception:  # the front serves anyway; the thread keeps trying
            log_failure(log, "front heartbeat failed; will try again in %.1f s", self._repeater.interval)
        self._repeater.start()

    def stop(self) -> None:
        self._repeater.stop()
        try:
            with self.store.write() as tx:
                tx.runtime.remove_front(self.front_id)
        except Exception:  # the row ages out; workers judge fronts by heartbeat age and pid
            log_failure(log, "could not remove front heartbeat row %s", self.front_id)
