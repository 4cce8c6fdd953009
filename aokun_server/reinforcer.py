"""Access reinforcement: what the front does after a recall has been answered."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from shared.live_config import LiveConfig
from shared.memories import MemoryService

log = logging.getLogger("aokun.front")


class Reinforcer:
    """Access reinforcement off the reply path: recalled memories grow stronger after the
    answer has gone out (one background thread, so writes never pile up concurrently)."""

    def __init__(self, memories: MemoryService, live: LiveConfig):
        self.memories = memories
        self.live = live
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reinforce")

    @property
    def enabled(self) -> bool:
        """retrieval.access_reinforcement as it is now."""
        return self.live.now.retrieval.access_reinforcement

    def touch(self, ids: list[int]) -> None:
        if self.enabled and ids:
            self._executor.submit(self._touch, ids, time.time())

    def close(self) -> None:
        """Finish the reinforcements already asked for; called before the store closes, which
        a write still under way would otherwise meet closed."""
        self._executor.shutdown(wait=True)

    def _touch(self, ids: list[int], now: float) -> None:
        try:
            self.memories.touch(ids, now)
        except Exception:
            log.exception("access reinforcement failed for %s", ids)
