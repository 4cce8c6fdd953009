"""The panel's recall: the real Recaller, built the way the front builds it (aokun_server/app.py
build_front), on the first search rather than at start, since loading an embedding model takes
seconds and memory a user who never searches should not pay.

The embedder and the two vector indexes live as long as the panel (embedding settings apply
only after a restart); the channels and the Recaller are rebuilt when the live retrieval
settings change, so a search on the panel uses the weights the settings page just saved.
Searching here is looking, not using: it does not count as an access of the memories found.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from shared.config import AppConfig, RetrievalConfig
from shared.search.recall import Hit, Recaller, RecallRequest
from shared.store.documents import DocumentFilter

EXTRAS_KEY = "recall"


@dataclass
class _Built:
    retrieval: RetrievalConfig
    recaller: Recaller


class PanelRecall:
    """Recall for the panel's search box; safe to call from several threads."""

    def __init__(self, ctx):
        self._ctx = ctx
        self._lock = threading.Lock()
        self._spaces = None          # (embedder, document index, entry index), built once
        self._built: _Built | None = None
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="panel-recall")

    def recall(self, query: str, k: int, scope: DocumentFilter) -> list[Hit]:
        """The best k memories for query within scope, each with its explain (blocking)."""
        return self._recaller().recall(RecallRequest(query, k, scope, explain=True))

    def _recaller(self) -> Recaller:
        config: AppConfig = self._ctx.config
        with self._lock:
            if self._built is None or self._built.retrieval != config.retrieval:
                self._built = _Built(config.retrieval, self._build(config))
            return self._built.recaller

    def _build(self, config: AppConfig) -> Recaller:
        from shared.search.channels import ChannelParts, build_channels

        embedder, index, entry_index = self._vector_spaces(config)
        store = self._ctx.memories.documents
        channels = build_channels(ChannelParts(store, config.retrieval, index, entry_index, config.graph))
        return Recaller(store, self._ctx.memories.segmenter, channels, embedder.embed_query,
                        config.retrieval, executor=self._executor)

    def _vector_spaces(self, config: AppConfig):
        if self._spaces is None:
            from shared.embedders import build_embedder, recorded_models, space_dim
            from shared.search.vectors import VectorIndex

            embedder = build_embedder(config.embedding, threads=1,
                                      recorded=recorded_models(self._ctx.db.connection()))
            dim = space_dim(config.embedding, embedder)  # opening the page never asks an API
            self._spaces = (embedder, VectorIndex(self._ctx.db, "document", embedder.model, dim),
                            VectorIndex(self._ctx.db, "graph_entry", embedder.model, dim))
        return self._spaces


def panel_recall(ctx) -> PanelRecall:
    """The panel's one PanelRecall (made on first use, kept in ctx.extras)."""
    found = ctx.extras.get(EXTRAS_KEY)
    if found is None:
        found = ctx.extras.setdefault(EXTRAS_KEY, PanelRecall(ctx))
    return found
