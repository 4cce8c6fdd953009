"""Build the front: open the store and queue, wire the channels, register the tools."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from functools import partial

from aokun_server.autostart import ensure_worker
from aokun_server.pipeline import Reinforcer
from aokun_server.server import AokunMCPServer
from aokun_server.tools import ToolDeps, register_tools
from shared import __version__
from shared.config import AppConfig
from shared.embedders import Embedder, build_embedder
from shared.extract.atoms import ttl_days
from shared.health import FrontHeartbeat
from shared.lifecycle import Lifecycle
from shared.memories import MemoryService
from shared.queue import open_queue
from shared.reconcile import reconcile
from shared.search.atoms import AtomSearch
from shared.search.channels import ChannelParts, build_channels
from shared.search.recall import Recaller
from shared.search.vectors import VectorIndex
from shared.store import vectors
from shared.store.db import Database
from shared.store.schema import open_database
from shared.tasks import Enqueuer
from shared.text.segment import Segmenter

log = logging.getLogger("aokun.front")

INSTRUCTIONS = (
    "Aokun is your long-term memory. Call memorize for anything worth keeping (facts about the "
    "user, decisions, plans, preferences); call recall before answering questions that may "
    "depend on earlier conversations. Pass persona_id to keep each user's memories apart."
)


@dataclass
class Front:
    server: AokunMCPServer
    config: AppConfig
    db: Database
    segmenter: Segmenter
    embedder: Embedder
    index: VectorIndex
    enqueuer: Enqueuer
    recaller: Recaller
    memories: MemoryService
    heartbeat: FrontHeartbeat | None = None

    def start_background(self, autostart_worker: bool, transport: str) -> None:
        """Beat as a live front, then warm caches, reconcile the queue and (stdio) make sure a
        worker runs — off the request path, so the front answers at once. The heartbeat comes
        first: an autostarted worker about to exit for want of fronts must see this one."""
        self.heartbeat = FrontHeartbeat(self.db, self.config.worker.heartbeat_interval_s, transport)
        self.heartbeat.start()
        threading.Thread(target=self._warm_up, name="warm-up", daemon=True).start()
        threading.Thread(target=self._housekeep, args=(autostart_worker,), name="start-up",
                         daemon=True).start()

    def close(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()
        self.db.close()

    def _warm_up(self) -> None:
        self.segmenter.warm_up()
        try:
            restored = self.memories.backfill_fts()
            if restored:
                log.warning("back-filled %d missing BM25 rows", restored)
        except Exception:
            log.exception("could not back-fill BM25 rows")
        try:
            self.index.sync()
            self.embedder.embed_query("warm up")
        except Exception as exc:
            log.warning("vector channel not ready (BM25 serves meanwhile): %s", exc)

    def _housekeep(self, autostart_worker: bool) -> None:
        try:
            if autostart_worker and self.config.worker.autostart:
                ensure_worker(self.config, self.db)
            reconcile(self.db, self.enqueuer, self.config.worker.heartbeat_timeout_s,
                      queue=self.config.queue)
        except Exception:
            log.exception("start-up reconcile failed; workers will reconcile")


def build_front(config: AppConfig) -> Front:
    """Open (and migrate) the database, open the queue, and return a ready MCP server."""
    db = open_database(config.storage)
    segmenter = Segmenter(config.text)
    embedder = build_embedder(config.embedding, threads=1)
    dim = _space_dim(config, embedder)
    index = VectorIndex(db, "document", embedder.model, dim)
    entry_index = VectorIndex(db, "graph_entry", embedder.model, dim)
    _warn_foreign_vectors(db, index)
    enqueuer = Enqueuer(open_queue(config.storage))
    memories = MemoryService(db, segmenter, enqueuer, partial(ttl_days, config=config.atoms))
    channels = build_channels(ChannelParts(memories.documents, config.retrieval, index, entry_index))
    recaller = Recaller(memories.documents, segmenter, channels, embedder.embed_query, config.retrieval)
    deps = ToolDeps(memories=memories, recaller=recaller, memory=config.memory, index=index,
                    reinforcer=Reinforcer(memories, config.retrieval.access_reinforcement),
                    atom_search=AtomSearch(db, segmenter),
                    lifecycle=Lifecycle(config, db),
                    reconcile_queue=lambda: vars(reconcile(db, enqueuer, config.worker.heartbeat_timeout_s,
                                                                      queue=config.queue)),
                    worker=config.worker,
                    max_content_chars=config.server.max_content_chars)
    server = AokunMCPServer("aokun-memory", version=__version__, instructions=INSTRUCTIONS,
                            log_level=config.server.log_level,
                            exposed_tools=config.server.exposed_tools)
    register_tools(server, deps)
    return Front(server, config, db, segmenter, embedder, index, enqueuer, recaller, memories)


def _space_dim(config: AppConfig, embedder: Embedder) -> int:
    # An API embedder's dimension is known from config or its first reply; don't call it here.
    if config.embedding.provider == "openai":
        return config.embedding.dimensions or 0
    return embedder.dim


def _warn_foreign_vectors(db: Database, index: VectorIndex) -> None:
    if index.dim:
        message = vectors.foreign_space_warning(db.connection(), index.model, index.dim)
        if message:
            log.warning(message)
