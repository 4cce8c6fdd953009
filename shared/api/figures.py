"""The pipeline figures memory_stats and `aokun stats` report: the queue, the workers, the
vectors and the summarizer's token usage, read from the store in one snapshot."""

from __future__ import annotations

import time

from shared.api.models import ModelUsage, QueueFigures, SummarizerFigures, VectorFigures, WorkerFigures
from shared.config import SummarizerConfig, WorkerConfig
from shared.pipeline_warnings import pipeline_warnings
from shared.search.vectors import VectorIndex
from shared.store.interface import Store
from shared.store.model.vectors import foreign_spaces_from


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
        "warnings": pipeline_warnings(queue, len(live), newest, now),
    }


def summarizer_figures(store: Store, config: SummarizerConfig) -> SummarizerFigures:
    """memory_stats' summarizer section: the provider in use and the tokens spent per model."""
    spent = store.usage.figures()
    model = config.model if config.provider == "llm" and config.model else None
    return SummarizerFigures(provider=config.provider, model=model,
                             usage={model: ModelUsage(**counts) for model, counts in spent.items()})
