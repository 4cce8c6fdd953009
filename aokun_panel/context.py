"""What every page handler needs, built once when the panel starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from aokun_panel.reader import Reader
from shared.config import AppConfig
from shared.live_config import LiveConfig
from shared.memories import MemoryService
from shared.store.db import Database


@dataclass
class PanelContext:
    live: LiveConfig
    db: Database                 # writes, through the memory service
    memories: MemoryService
    reader: Reader               # reads, off the event loop
    templates: Any               # starlette Jinja2Templates
    csrf: str
    extras: dict = field(default_factory=dict)  # lazily built parts (recall, embedder...)

    @property
    def config(self) -> AppConfig:
        return self.live.current


def build_memory_service(config: AppConfig, db: Database) -> MemoryService:
    """The memory service queueing through Huey, as the fronts use it."""
    from shared.extract.atoms import ttl_days
    from shared.queue import open_queue
    from shared.tasks import Enqueuer
    from shared.text.segment import Segmenter

    return MemoryService(db, Segmenter(config.text), Enqueuer(open_queue(config.storage)),
                         partial(ttl_days, config=config.atoms), memory=config.memory)
