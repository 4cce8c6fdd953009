"""A worker's heartbeat row, kept fresh by a daemon thread, so fronts can tell it is alive.

The thread must outlive any error: if it died, other processes would soon take this live
worker for dead and lease its running stages again. So a failed beat, whatever the exception,
is logged and the next one tried on time.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from shared.logs import log_failure
from shared.store.interface import Store

log = logging.getLogger("aokun.worker")


class Heartbeat:
    """Beats every `interval` seconds from start() until stop()."""

    def __init__(self, store: Store, interval: float = 5.0):
        self.store = store
        self.interval = interval
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        self._beat()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 1)
        try:
            with self.store.write() as tx:
                tx.runtime.remove_worker(self.worker_id)
        except Exception as exc:  # the row goes stale and is taken for dead, then pruned
            log.warning("cannot remove worker %s from the workers table: %s", self.worker_id, exc)

    def _beat(self) -> None:
        with self.store.write() as tx:
            tx.runtime.beat(self.worker_id, os.getpid(), socket.gethostname(), time.time())

    def _run(self) -> None:
        failed = 0
        while not self._stop.wait(self.interval):
            try:
                self._beat()
            except Exception:
                failed += 1
                if failed == 1:  # one traceback per outage, not one per beat
                    log_failure(log, "heartbeat failed; retrying every %.1f s", self.interval)
                continue
            if failed:
                log.warning("heartbeat back after %d failed beat(s)", failed)
                failed = 0
