"""What the front does around the tools: access reinforcement, the pipeline figures and the
summarizer's token usage."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from aokun_server.models import ModelUsage, QueueFigures, SummarizerFigures, VectorFigures, WorkerFigures
from shared import health
from shared.config import SummarizerConfig, WorkerConfig
from shared.memories import MemoryService
from shared.search.vectors import VectorIndex
from shared.store.interface import Store
from shared.store.vectors import foreign_spaces_from

log = logging.getLogger("aokun.front")


class Reinforcer:
    """Access reinforcement off the reply path: recalled memories grow stronger after the
    answer has gone out (one background thread, so writes never pile up concurrently)."""

    def __init__(self, memories: MemoryService, enabled: bool):
        self.memories = memories
        self.enabled = enabled
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reinforce")

    def touch(self, ids: list[int]) -> None:
        if self.enabled and ids:
            self._executor.submit(self._touch, ids, time.time())

    def _touch(self, ids: list[int], now: float) -> None:
        try:
            self.memories.touch(ids, now)
        except Exception:
            log.exception("access reinforcement failed for %s", ids)


def pipeline_figures(store: Store, index: VectorIndex, worker: WorkerConfig) -> dict:
    """memory_stats' queue, vectors and workers sections, from the stage and vector rows."""
    now = time.time()
    with store.read() as s:
        queue = s.stages.queue_figures(now)
        spaces = s.vectors.space_figures()
        with_vector = s.vectors.documents_with_vector(index.model, index.dim) if index.dim else 0
        total = s.documents.count()
        live = s.runtime.live_workers(now - worker.heartbeat_timeout_s)
        newest = s.runtime.newest_heartbeat()
    mine = [(kind, count) for kind, model, dim, count in spaces
            if model == index.model and (not index.dim or dim == index.dim)]
    return {
        "queue": QueueFigures(**queue),
        "vectors": VectorFigures(
            documents=with_vector,
            graph_entries=sum(c for kind, c in mine if kind == "graph_entry"),
            model=index.model, dim=index.dim, behind=total - with_vector,
            foreign=sum(count for _, _, _, count in foreign_spaces_from(spaces, index.model, index.dim))),
        "workers": WorkerFigures(live=len(live),
                                 heartbeat_age_s=round(now - newest, 1) if newest else None),
        "warnings": health.pipeline_warnings(queue, len(live), newest, now),
    }


def summarizer_figures(store: Store, config: SummarizerConfig) -> SummarizerFigures:
    """memory_stats' summarizer section: the provider in use and the tokens spent per model."""
    spent = store.usage.figures()
    model = config.model if config.provider == "llm" and config.model else None
    return SummarizerFigures(provider=config.provider, model=model,
                             usage={model: ModelUsage(**counts) for model, counts in spent.items()})
