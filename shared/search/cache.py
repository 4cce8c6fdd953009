"""The recall cache: TTL + LRU, invalidated at once by a write epoch kept in the store (its
meta table: every process on every host sees it)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class RecallCache:
    """Entries live ttl_s seconds and only while the write epoch they were made under holds."""

    def __init__(self, ttl_s: float, size: int, clock: Callable[[], float] = time.monotonic):
        self.ttl_s = ttl_s
        self.size = size
        self.clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, int, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, epoch: int) -> Any | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            made, made_epoch, value = entry
            if made_epoch != epoch or self.clock() - made > self.ttl_s:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, epoch: int, value: Any) -> None:
        with self._lock:
            self._entries[key] = (self.clock(), epoch, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
