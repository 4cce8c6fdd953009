"""The running configuration of a process, replaced when the config file changes.

Holds the current AppConfig; whoever needs a value reads `live.current` when it needs it
(never keeps a section past one request or job), so a saved setting applies without a restart.
"""

from __future__ import annotations

import threading
from typing import Callable

from shared.config import AppConfig

Listener = Callable[[AppConfig, AppConfig], None]  # (old, new)


class LiveConfig:
    def __init__(self, config: AppConfig):
        self._config = config
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    @property
    def current(self) -> AppConfig:
        return self._config

    def subscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def replace(self, new: AppConfig) -> None:
        """Make `new` current and tell every listener (old, new)."""
        with self._lock:
            old, self._config = self._config, new
            listeners = list(self._listeners)
        for listener in listeners:
            listener(old, new)
