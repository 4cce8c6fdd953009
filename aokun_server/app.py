"""Build the front: open the store and queue, wire the channels, register the tools.

Everything reads the process's LiveConfig (shared/live_config.py): `live.now` per call (tools,
recall, access reinforcement, lifecycle jobs), subscribing to rebuild what it built from it (the
recaller with its channels, the listed tools, the log level), so a saved config file applies
without a restart; `live.at_start` for what restart keys built (the heartbeat, the token, the
chat model's call limit)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from aokun_server.autostart import ensure_worker
from aokun_server.heartbeat import FrontHeartbeat
from aokun_server.identity import Identity
from aokun_server.reinforcer import Reinforcer
from aokun_server.server import AokunMCPServer
from aokun_server.tools import ToolDeps, register_tools
from aokun_server.tools.model_calls import ModelCalls
from shared import __version__
from shared.assembly import LiveRecaller, Services, open_services
from shared.config import AppConfig
from shared.errors import StorageError
from shared.live_config import ConfigWatcher, LiveConfig, follow_log_level
from shared.memories import MemoryService

log = logging.getLogger("aokun.front")

INSTRUCTIONS = (
    "Aokun is your long-term memory. Call memorize for anything worth keeping (facts about the "
    "user, decisions, plans, preferences); call recall before answering questions that may "
    "depend on earlier conversations. Pass persona_id to keep each user's memories apart."
)


@dataclass
class Front:
    server: AokunMCPServer
    services: Services
    reinforcer: Reinforcer
    identity: Identity
    heartbeat: FrontHeartbeat | None = None
    watcher: ConfigWatcher | None = None

    @property
    def live(self) -> LiveConfig:
        return self.services.live

    @property
    def memories(self) -> MemoryService:
        return self.services.memories

    @property
    def recaller(self) -> LiveRecaller:
        return self.services.recaller

    def start_background(self, autostart_worker: bool, transport: str, endpoint: str | None = None) -> None:
        """Beat as a live front (with the endpoint it listens on, over HTTP), then warm caches,
        reconcile the queue and (stdio) make sure a worker runs — off the request path, so the
        front answers at once. The heartbeat comes first: an autostarted worker about to exit
        for want of fronts must see this one. Then follow the config file."""
        self.heartbeat = FrontHeartbeat(self.services.store, self.live.at_start.worker.heartbeat_interval_s,
                                        transport, endpoint)
        self.heartbeat.start()
        threading.Thread(target=self._warm_up, name="warm-up", daemon=True).start()
        threading.Thread(target=self._load_indexes, name="vector-indexes", daemon=True).start()
        threading.Thread(target=self._housekeep, args=(autostart_worker,), name="start-up",
                         daemon=True).start()
        if autostart_worker:
            self.live.subscribe(self._autostart_turned_on)
        self.watcher = self.live.watch()

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        if self.heartbeat is not None:
            self.heartbeat.stop()
        self.reinforcer.close()
        self.services.close()

    def _warm_up(self) -> None:
        self.services.segmenter.warm_up()
        try:
            restored = self.memories.backfill_fts()
            if restored:
                log.warning("back-filled %d missing BM25 rows", restored)
        except Exception:
            log.exception("could not back-fill BM25 rows")
        try:
            self.services.embedder.embed_query("warm up")
        except Exception as exc:
            log.warning("vector channel not ready (BM25 serves meanwhile): %s", exc)

    def _load_indexes(self) -> None:
        # Beside the jieba load rather than after it: both FAISS indexes (from their snapshots
        # where the worker wrote them) are ready by the first hybrid recall.
        for index in self.services.vector_indexes:
            try:
                index.sync()
            except Exception as exc:
                log.warning("%s vectors not ready (the other channels serve meanwhile): %s",
                            index.kind, exc)

    def _housekeep(self, autostart_worker: bool) -> None:
        try:
            if autostart_worker and self.live.now.worker.autostart:
                ensure_worker(self.live.now, self.services.store)
            self.services.reconcile()
            swept = self.services.lifecycle.sweep_partial_backups()
            if swept:
                log.warning("removed %d unfinished backup file(s) left by a process killed "
                            "while writing: %s", len(swept), ", ".join(swept))
        except StorageError as exc:  # one line: e.g. the queue's Redis is away for now
            log.warning("start-up reconcile failed; workers will reconcile: %s", exc)
        except Exception:
            log.exception("start-up reconcile failed; workers will reconcile")

    def _autostart_turned_on(self, old: AppConfig, new: AppConfig) -> None:
        # As at start: a stdio front makes sure a worker runs once autostart is on.
        if new.worker.autostart and not old.worker.autostart:
            threading.Thread(target=self._ensure_worker, name="autostart", daemon=True).start()

    def _ensure_worker(self) -> None:
        try:
            ensure_worker(self.live.now, self.services.store)
        except Exception:
            log.exception("could not start a worker; start aokun-worker by hand")


def build_front(config: AppConfig) -> Front:
    """Open (and migrate) the database, open the queue, and return a ready MCP server."""
    services = open_services(config)
    live = services.live
    _warn_foreign_vectors(services)
    reinforcer = Reinforcer(services.memories, live)
    index = services.vector_indexes.document
    identity = Identity.from_environment(services.store, live.at_start.server.token)
    deps = ToolDeps(memories=services.memories, recaller=services.recaller, index=index,
                    principal=identity.current, reinforcer=reinforcer, atom_search=services.atom_search,
                    lifecycle=services.lifecycle,
                    reconcile_queue=lambda: vars(services.reconcile()),
                    live=live, summarizer=services.summarizer,
                    model_calls=ModelCalls(live.at_start.summarizer.max_concurrent, "the chat model"))
    server = AokunMCPServer("aokun-memory", version=__version__, instructions=INSTRUCTIONS,
                            log_level=live.now.server.log_level,
                            exposed_tools=live.now.server.exposed_tools)
    register_tools(server, deps)
    live.subscribe(lambda old, new: server.expose(live.now.server.exposed_tools))
    follow_log_level(live)
    return Front(server, services, reinforcer, identity)


def _warn_foreign_vectors(services: Services) -> None:
    index = services.vector_indexes.document
    if index.dim:
        message = services.store.vectors.foreign_space_warning(index.model, index.dim)
        if message:
            log.warning(message)
