"""A daemon thread that keeps calling a function: the front's heartbeat and the autostarted
worker's idle exit both run on one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from shared.logs import log_failure

log = logging.getLogger("aokun.health")


class Repeater:
    """A daemon thread that calls `tick` every `interval` seconds until stop() or until tick
    returns True. An exception is logged and the next tick comes anyway: a dead heartbeat
    thread would make a live process look dead."""

    def __init__(self, name: str, interval: float, tick: Callable[[], bool]):
        self.interval = interval
        self.tick = tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self.tick():
                    return
            except Exception:
                log_failure(log, "%s failed; will try again in %.1f s", self._thread.name, self.interval)
