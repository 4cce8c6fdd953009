"""What the tools depend on, passed to each explicitly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aokun_server.reinforcer import Reinforcer
from aokun_server.tools.model_calls import ModelCalls
from shared.access import ADMIN, Principal
from shared.assembly import LiveRecaller
from shared.lifecycle import Lifecycle
from shared.live_config import LiveConfig
from shared.memories import MemoryService
from shared.search.atom_search import AtomSearch
from shared.search.vectors import VectorIndex

if TYPE_CHECKING:
    from shared.store.interface import Store
    from shared.summarize.summarizer import Summarizer


@dataclass(frozen=True)
class ToolDeps:
    """What the tools need, built once at start-up. Settings are read from `live` at each
    call, so a changed config file applies from the next call on."""

    memories: MemoryService
    recaller: LiveRecaller
    index: VectorIndex
    reinforcer: Reinforcer
    atom_search: AtomSearch
    lifecycle: Lifecycle
    reconcile_queue: Callable[[], dict]
    live: LiveConfig
    summarizer: Summarizer
    # Who makes the call being served (aokun_server/identity.py); what it may touch is
    # shared/access.py's rule. Built in-process without a front: the admin.
    principal: Callable[[], Principal] = lambda: ADMIN
    # Where calls that wait on a chat model run (summarize_memory with provider llm).
    model_calls: ModelCalls = field(default_factory=lambda: ModelCalls(4, "the chat model"))

    @property
    def store(self) -> Store:
        """The store the memory service writes to, for the tools' reads."""
        return self.memories.store
