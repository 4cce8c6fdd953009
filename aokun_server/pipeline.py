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
from shared.store import documents, runtime, stages, usage, vectors
from shared.store.db import Database

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


def pipeline_figures(db: Database, index: VectorIndex, worker: WorkerConfig) -> dict:
    """memory_stats' queue, vectors and workers sections, from the stage and vector rows."""
    now = time.time()
    with db.snapshot() as conn:
        queue = stages.queue_figures(conn, now)
        spaces = vectors.space_figures(conn)
        with_vector = vectors.documents_with_vector(conn, index.model, index.dim) if index.dim else 0
        total = documents.table_counts(conn)["documents"]
        live = runtime.live_workers(conn, now - worker.heartbeat_timeout_s)
        newest = runtime.newest_heartbeat(conn)
    mine = [(kind, count) for kind, model, dim, count in spaces
            if model == index.model and (not index.dim or dim == index.dim)]
    return {
        "queue": QueueFigures(**queue),
        "vectors": VectorFigures(
            documents=with_vector,
            graph_entries=sum(c for kind, c in mine if kind == "graph_entry"),
            model=index.model, dim=index.dim, behind=total - with_vector,
            foreign=sum(count for _, _, _, count in vectors.foreign_spaces_from(spaces, index.model, index.dim))),
        "workers": WorkerFigures(live=len(live),
                                 heartbeat_age_s=round(now - newest, 1) if newest else None),
        "warnings": health.pipeline_warnings(queue, len(live), newest, now),
    }


def summarizer_figures(db: Database, config: SummarizerConfig) -> SummarizerFigures:
    """memory_stats' summarizer section: the provider in use and the tokens spent per model."""
    with db.snapshot() as conn:
        spent = usage.figures(conn)
    model = config.model if config.provider == "llm" and config.model else None
    return SummarizerFigures(provider=config.provider, model=model,
                             usage={model: ModelUsage(**counts) for model, counts in spent.items()})
