"""What every page handler needs, built once when the panel starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aokun_panel.reader import Reader
from aokun_panel.render import Page
from shared.assembly import Services
from shared.live_config import LiveConfig
from shared.memories import MemoryService
from shared.store.interface import Store


@dataclass
class PanelContext:
    services: Services           # writes through its memory service; recall on first search
    reader: Reader               # reads, off the event loop
    templates: Any               # starlette Jinja2Templates
    csrf: str
    nav: list[Page]              # the pages, in navigation order
    search_ready: bool = False   # a search has been answered: the embedding model is loaded

    @property
    def live(self) -> LiveConfig:
        return self.services.live

    @property
    def store(self) -> Store:
        return self.services.store

    @property
    def memories(self) -> MemoryService:
        return self.services.memories
