"""The one place a process is put together: front, worker, panel and admin CLI alike.

`open_services` opens the store and returns `Services`, which builds each part the first time
it is asked for and keeps it: a command that only counts rows never loads an embedding model,
and a panel that is never searched never builds a recaller. Every part reads the process's
LiveConfig (shared/live_config.py), so a key that applies live reaches every process kind
through the same code:
- per call, through `live.now` (the memory service's memory.* and atoms.ttl_* keys,
  the lifecycle's forgetting.* and backup.* keys, the summarizer's summarizer.* keys);
- by rebuilding, from `live.now`, what was built from it when it changes (the recaller and its
  channels on retrieval.*, below).
What restart keys shape (the store, the queue, the segmenter, the embedder, the graph's aliases,
the atom rules) is built from `live.at_start`.
What a process adds on top (the MCP server and its tools, the worker's stage runner and
periodic jobs, the panel's pages) is built in its own package from these parts.

`open_reader` is the light assembly of a process that only reads, and must answer fast:
`aokun hook`, which runs before every prompt a host sends. Its store is opened as it is, and
it recalls from the channels that need no vectors (`keyword_recaller`).

Parts are imported when first built, not when this module is imported: `aokun status` must
answer without loading the embedder, and a hook without the memory service, the queue or, at
session start, search.
"""
# Lazy imports: the embedder (an ONNX model or an HTTP client), FAISS, the summarizer's rules,
# the memory service, the queue and search load in the part that builds them, so a process that
# never uses one never pays for it (a hook's time is the user's wait: scripts/bench_hook.py).

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from shared.config import AppConfig
from shared.errors import ConfigError
from shared.live_config import LiveConfig
from shared.store import open_store
from shared.store.interface import Store

if TYPE_CHECKING:
    from shared.embedders import Embedder
    from shared.lifecycle import Lifecycle
    from shared.memories import MemoryService
    from shared.reconcile import ReconcileReport
    from shared.search.atom_search import AtomSearch
    from shared.search.cache import RecallCache
    from shared.search.channels import ChannelParts
    from shared.search.recall import Hit, Recaller, RecallRequest
    from shared.search.vectors import VectorIndexes
    from shared.summarize.summarizer import Summarizer
    from shared.tasks import Enqueuer
    from shared.text.segment import Segmenter

log = logging.getLogger("aokun.assembly")
_UNBUILT = object()
KEYWORD_CHANNELS = ("bm25", "graph_keyword")  # the recall channels that need no vectors


def part(build: Callable[[Services], Any]) -> property:
    """A part built the first time it is asked for, once even when threads ask together."""
    name = build.__name__

    def get(self: Services) -> Any:
        found = self._parts.get(name, _UNBUILT)
        if found is _UNBUILT:
            with self._lock:
                found = self._parts.get(name, _UNBUILT)
                if found is _UNBUILT:
                    found = self._parts[name] = build(self)
        return found

    return property(get, doc=build.__doc__)


class Services:
    """What a process needs from the store up, each part built on first use.

    `queued` says whether memories written here are queued for the workers at once (fronts,
    panel, most commands) or left for a reconciler pass (a bulk import queues once at its end;
    a worker runs stages itself). `embed_threads` is the embedding model's thread count: one
    for processes that embed queries, the configured count for those that embed memories."""

    def __init__(self, live: LiveConfig, store: Store, *, queued: bool = True, embed_threads: int = 1):
        self.live = live
        self.store = store
        self.queued = queued
        self.embed_threads = embed_threads
        self._lock = threading.RLock()  # re-entrant: one part is built from others
        self._parts: dict[str, Any] = {}

    @part
    def segmenter(self) -> Segmenter:
        from shared.text.segment import Segmenter

        return Segmenter(self.live.at_start.text)

    @part
    def huey(self) -> Any:
        """The task queue (Huey) of this data_dir."""
        from shared.queue import open_queue

        return open_queue(self.live.at_start.storage, self.live.at_start.queue)

    @part
    def enqueuer(self) -> Enqueuer | None:
        from shared.tasks import Enqueuer

        return Enqueuer(self.huey) if self.queued else None

    @part
    def memories(self) -> MemoryService:
        from shared.memories import MemoryService

        return MemoryService(self.store, self.segmenter, self.enqueuer, self.live)

    @part
    def lifecycle(self) -> Lifecycle:
        from shared.lifecycle import Lifecycle

        return Lifecycle(self.live, self.memories)

    @part
    def atom_search(self) -> AtomSearch:
        from shared.search.atom_search import AtomSearch

        return AtomSearch(self.store, self.segmenter)

    @part
    def embedder(self) -> Embedder:
        from shared.embedders import build_embedder, recorded_models

        return build_embedder(self.live.at_start.embedding, threads=self.embed_threads,
                              recorded=recorded_models(self.store))

    @part
    def vector_indexes(self) -> VectorIndexes:
        """The FAISS indexes of memories, their passages and graph entries, in the embedder's space."""
        from shared.embedders import space_dim
        from shared.search.vectors import VectorIndex, VectorIndexes

        embedder = self.embedder
        dim = space_dim(self.live.at_start.embedding, embedder)  # never asks an API at start
        return VectorIndexes(*(VectorIndex(self.store, kind, embedder.model, dim)
                               for kind in ("document", "passage", "graph_entry")))

    @part
    def recaller(self) -> LiveRecaller:
        from shared.search.channels import ChannelParts

        parts = ChannelParts(self.store, self.live.now.retrieval, self.vector_indexes, self.live.at_start.graph)
        return LiveRecaller(self.store, self.segmenter, parts,
                            self.embedder.embed_query, self.live)

    @part
    def keyword_recaller(self) -> Recaller:
        """Recall from the channels that need no vectors (BM25 and the graph's keywords) and
        without a cache, built from the retrieval settings at hand: for a process that answers
        once and cannot wait for an embedding model to load. It is what a front serves while its
        embedder is down."""
        from shared.search.channels import ChannelParts, build_channels
        from shared.search.recall import Recaller

        retrieval = self.live.now.retrieval
        channels = tuple(c for c in retrieval.channels if c in KEYWORD_CHANNELS)
        if not channels:
            raise ConfigError("retrieval.channels has neither bm25 nor graph_keyword, which recall "
                              "without a running front needs")
        retrieval = replace(retrieval, channels=channels, cache_enabled=False)
        # No vector index: the channels kept above use none.
        parts = ChannelParts(self.store, retrieval, None, self.live.at_start.graph)  # pyright: ignore[reportArgumentType]
        return Recaller(self.store, self.segmenter, build_channels(parts), None, retrieval)

    @part
    def summarizer(self) -> Summarizer:
        from shared.extract.atomize import AtomRules
        from shared.summarize.rules import RulesSummarizer
        from shared.summarize.summarizer import Summarizer

        rules = RulesSummarizer(AtomRules.load(self.live.at_start.atoms.rules_file), self.segmenter)
        return Summarizer(self.store, rules, self.live)

    def reconcile(self, enqueuer: Enqueuer | None = None) -> ReconcileReport:
        """Reclaim dead workers' leases and queue every stage waiting unqueued."""
        from shared.reconcile import reconcile
        from shared.tasks import Enqueuer

        config = self.live.now
        return reconcile(self.store, enqueuer or self.enqueuer or Enqueuer(self.huey),
                         config.worker.heartbeat_timeout_s, queue=config.queue)

    def close(self) -> None:
        keyword_recaller = self._parts.get("keyword_recaller")
        if keyword_recaller is not None:  # its threads, idle by now, need not outlive the store
            keyword_recaller.executor.shutdown(wait=False)
        self.store.close()


def open_services(config: AppConfig | LiveConfig, *, queued: bool = True,
                  embed_threads: int = 1) -> Services:
    """Open (and migrate) the store of `config` and return the parts built from it."""
    live = config if isinstance(config, LiveConfig) else LiveConfig(config)
    return Services(live, open_store(live.at_start.storage), queued=queued,
                    embed_threads=embed_threads)


def open_reader(config: AppConfig) -> Services:
    """The store of `config` opened for reading as it is (never created, never migrated, so
    StorageError "cannot_open" when there is none) and the parts built from it, nothing queued."""
    return Services(LiveConfig(config), open_store(config.storage, migrate=False), queued=False)


class LiveRecaller:
    """Recall with the current retrieval settings: the Recaller (its channels, which carry
    their weights, and its cache, whose answers were made under the old settings) is built
    again when a retrieval key changes. A recall in flight finishes with the one it began with."""

    def __init__(self, store: Store, segmenter: Segmenter, parts: ChannelParts,
                 embed: Callable | None, live: LiveConfig):
        self.store, self.segmenter, self.parts, self.embed = store, segmenter, parts, embed
        self.executor = ThreadPoolExecutor(max_workers=3, thread_name_prefix="recall")
        self.live = live
        self.current = self._build()
        live.subscribe(self._settings_changed)

    @property
    def cache(self) -> RecallCache | None:
        return self.current.cache

    def recall(self, request: RecallRequest) -> list[Hit]:
        return self.current.recall(request)

    def _build(self) -> Recaller:
        from shared.search.channels import build_channels
        from shared.search.recall import Recaller

        config = self.live.now.retrieval
        channels = build_channels(replace(self.parts, config=config))
        space = self.parts.indexes.document.model if self.parts.indexes is not None else None
        return Recaller(self.store, self.segmenter, channels, self.embed, config, self.executor, space=space)

    def _settings_changed(self, old: AppConfig, new: AppConfig) -> None:
        if old.retrieval != new.retrieval:
            self.current = self._build()
