"""Where the calls that wait on a chat model run: a bounded pool of their own.

The SDK runs every sync tool in one shared thread pool (anyio's, 40 threads). A model that
never answers would hold one of those threads per call until its timeout, and enough such
calls leave memorize and recall with no thread to run in. A call that may wait on a model
(summarize_memory with the llm provider) is therefore awaited from the event loop and run in
this pool instead: at most `threads` run at once, at most `waiting` more wait for a thread,
and any call beyond those is refused at once ("busy, retry"), so the SDK's pool stays free.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from shared.errors import InvalidInput

T = TypeVar("T")

# Calls allowed to wait for a thread, per thread of the pool.
WAITING_PER_THREAD = 4


class ModelCalls:
    """A bounded pool for model-bound work; `run` awaits one call in it. Its threads are
    daemons, started with the first call: a model that never answers does not hold up the
    process's exit."""

    def __init__(self, threads: int, what: str = "the model", waiting: int | None = None):
        self.threads = threads
        self.limit = threads + (WAITING_PER_THREAD * threads if waiting is None else waiting)
        self.what = what
        self._admitted = 0
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._started = 0

    @property
    def admitted(self) -> int:
        """Calls running or waiting now."""
        return self._admitted

    async def run(self, work: Callable[[], T]) -> T:
        """work() in the pool, awaited; InvalidInput when the pool and its queue are full.
        A caller that stops waiting (cancelled) frees its place once the work ends, or at
        once if it had not started."""
        future: Future = Future()
        self._admit()
        future.add_done_callback(self._release)
        self._jobs.put((future, work))
        return await asyncio.wrap_future(future)

    def _admit(self) -> None:
        with self._lock:
            if self._admitted >= self.limit:
                raise InvalidInput(
                    f"busy: {self._admitted} calls are already waiting on {self.what} (at most "
                    f"{self.threads} at once); retry in a moment, or use provider=rules")
            self._admitted += 1
            if self._started < min(self._admitted, self.threads):
                self._started += 1
                threading.Thread(target=self._serve, name=f"model-call-{self._started}",
                                 daemon=True).start()

    def _release(self, _future: Future) -> None:
        with self._lock:
            self._admitted -= 1

    def _serve(self) -> None:
        while True:
            future, work = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue  # its caller stopped waiting before it started
            try:
                result = work()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)
