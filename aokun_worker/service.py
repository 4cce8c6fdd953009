"""The worker process, wired: heartbeat, stage runner, reconciler, periodic jobs, Huey consumer."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from aokun_worker.handlers import AtomsHandler, EmbedHandler, GraphHandler
from aokun_worker.heartbeat import Heartbeat
from aokun_worker.idle_exit import IdleExit
from aokun_worker.periodic import PeriodicJob, PeriodicScheduler, SettleWatch
from aokun_worker.runner import RunnerParts, StageRunner
from shared import platform
from shared.assembly import Services, open_services
from shared.config import AppConfig
from shared.embedders import space_dim
from shared.extract.atomize import AtomRules
from shared.extract.graph_rules import GraphBuilder
from shared.queue import describe_queue, require_reachable
from shared.search.vectors import VectorIndex
from shared.store.interface import Store
from shared.store.model.fulltext import FTS_TABLES
from shared.store.model.vectors import KINDS
from shared.tasks import Enqueuer
from shared.time_zone import user_zone
from shared.units import DAY, HOUR
from shared.worker_pid_files import write_pid_file

log = logging.getLogger("aokun.worker")

HOUSEKEEPING_INTERVAL_S = HOUR
TOMBSTONE_KEEP_S = DAY
# FAISS snapshots are written once vector writes have paused this long (an embedding burst
# writes every second or so), or after SNAPSHOT_MAX_WAIT_S of writes that never pause; and
# only when a front would otherwise apply more changes than this share of the snapshot's
# vectors (at 100k vectors 1,000 changes apply in ~30 ms; a rewrite takes 0.3-0.7 s and 78 MB).
SNAPSHOT_SETTLE_S = 10.0
SNAPSHOT_MAX_WAIT_S = 600.0
SNAPSHOT_STALE_FRACTION = 0.01


class WorkerService:
    """One worker process: everything it runs, built from the start config (`live.at_start`)
    once; what can follow a changed config file (queue numbers, atom shelf lives, periodic
    intervals, forgetting and backup settings, idle exit) is built from `live.now` and built
    again when the file changes."""

    def __init__(self, services: Services, autostarted: bool = False):
        self.services = services
        self.live = services.live
        self.store = services.store
        start = self.live.at_start
        require_reachable(start.queue)
        self.huey = services.huey
        self.autostarted = autostarted
        self.heartbeat = Heartbeat(self.store, start.worker.heartbeat_interval_s)
        self.embedder = services.embedder
        self.segmenter = services.segmenter
        self.atom_rules = AtomRules.load(start.atoms.rules_file)
        graph = GraphHandler(self.store, GraphBuilder(self.segmenter, start.graph), self.embedder.model)
        parts = RunnerParts(store=self.store, handlers={**self._handlers(), "graph": graph},
                            queue=self.live.now.queue, owner=self.heartbeat.worker_id)
        self.runner = StageRunner(parts)
        self.enqueuer = Enqueuer(self.huey, processor=self.runner.process)
        self.runner.enqueuer = self.enqueuer
        self.lifecycle = services.lifecycle
        # Only for repairs at start (BM25 rows back-filled); memories are written by fronts.
        self.memories = services.memories
        self.scheduler = PeriodicScheduler(self.store, self._jobs(), owner=self.heartbeat.worker_id)
        self.snapshots = SettleWatch("snapshots", self._vector_state, self.snapshot_job,
                                     SNAPSHOT_SETTLE_S, SNAPSHOT_MAX_WAIT_S)
        self.idle = IdleWatch(self)
        self.live.subscribe(self._config_changed)

    def _handlers(self) -> dict:
        """The stage handlers built from live settings (the graph's are restart-only)."""
        config = self.live.now
        return {"embed": EmbedHandler(self.embedder, config.queue.embed_batch_size, self.store),
                "atoms": AtomsHandler(self.atom_rules, self.segmenter, config.atoms,
                                      user_zone(config.memory.time_zone))}

    def _jobs(self) -> list[PeriodicJob]:
        config, lifecycle = self.live.now, self.lifecycle
        jobs = [
            PeriodicJob("reconcile", config.queue.reconcile_interval_s, self.reconcile_job),
            PeriodicJob("housekeeping", HOUSEKEEPING_INTERVAL_S, self.housekeeping_job),
            # Hourly: the job itself applies every daily decay that fell due (catch-up).
            PeriodicJob("decay", HOUSEKEEPING_INTERVAL_S, lambda prev, now: str(lifecycle.decay(now))),
            PeriodicJob("archive", DAY, lambda prev, now: str(lifecycle.archive(now))),
            PeriodicJob("atoms", config.forgetting.atom_maintenance_interval_hours * HOUR,
                        lambda prev, now: str(lifecycle.sweep_atoms(now))),
        ]
        if config.backup.daily:
            jobs.append(PeriodicJob("backup", DAY, lambda prev, now: str(lifecycle.backup(now, "daily"))))
        return jobs

    def _config_changed(self, old: AppConfig, new: AppConfig) -> None:
        """Rebuild what was built from the settings; a job in flight ends with the old ones."""
        parts = self.runner.parts
        self.runner.parts = replace(parts, queue=self.live.now.queue,
                                    handlers={**parts.handlers, **self._handlers()})
        self.scheduler.jobs = self._jobs()
        self.idle.follow(self.live.now.worker.idle_exit_s)

    @classmethod
    def open(cls, config: AppConfig, autostarted: bool = False) -> WorkerService:
        """Build the worker; `autostarted` (a front started it) lets it exit when idle."""
        services = open_services(config, queued=False, embed_threads=config.embedding.threads)
        service = cls(services, autostarted)
        _warn_foreign_vectors(service.store, service.embedder)
        restored = service.memories.backfill_fts()
        if restored:
            log.warning("back-filled %d missing BM25 rows", restored)
        upgraded = service.lifecycle.backup_if_version_changed(time.time())
        if upgraded:
            log.info("new version: full backup written to %s", upgraded["path"])
        return service

    def reconcile_job(self, previous: float | None, now: float) -> str:
        report = self.services.reconcile(self.enqueuer)
        return f"{report.reclaimed} reclaimed, {report.enqueued} queued"

    def housekeeping_job(self, previous: float | None, now: float) -> str:
        with self.store.write() as tx:
            pruned = tx.vectors.prune_tombstones(now - TOMBSTONE_KEEP_S)
            gone = tx.runtime.prune_workers(now - TOMBSTONE_KEEP_S)
            fronts = tx.runtime.prune_fronts(now - TOMBSTONE_KEEP_S)
        # Words that edits and re-run stages replaced leave the full-text indexes (deletes
        # drop theirs at once; on SQLite < 3.44 doing so per edit would rewrite the index).
        with self.store.write() as tx:
            tx.fts.scrub_terms(FTS_TABLES)
        self.store.flush_deleted()
        self.store.refresh_statistics()
        return (f"{pruned} vector tombstones, {gone} dead worker rows and {fronts} dead front rows"
                " pruned; replaced words scrubbed from the full-text indexes; statistics refreshed")

    def _vector_state(self) -> tuple[int, int]:
        """What a snapshot depends on: the change sequence, and the tombstone floor (pruning
        can make a snapshot unusable without any new vector)."""
        with self.store.read() as s:
            return s.vectors.current_seq(), s.vectors.tombstone_floor()

    def snapshot_job(self) -> str:
        """Bring each FAISS snapshot up to date, so a front starts from it; the index is
        built (from the old snapshot and the changes since) only while writing."""
        dim = space_dim(self.live.at_start.embedding, self.embedder)
        return "; ".join(VectorIndex(self.store, kind, self.embedder.model, dim)
                         .save_snapshot(SNAPSHOT_STALE_FRACTION) for kind in KINDS)

    def run(self) -> int:
        """Consume until SIGTERM or SIGINT (both let running jobs finish) or, for an
        autostarted worker, until it has been idle for worker.idle_exit_s."""
        # Huey installs its graceful SIGTERM handler only when the consumer starts; a SIGTERM
        # before that (honcho stopping a worker that is still starting) must not kill us.
        self._consumer = None
        for stop_signal in platform.graceful_stop_signals():
            signal.signal(stop_signal, self._stop_before_consuming)
        self.heartbeat.start()
        watcher = self.live.watch()
        pid_path = write_pid_file(self.live.at_start.storage.data_dir)
        try:
            if self.autostarted:
                with self.store.write() as tx:
                    tx.runtime.mark_autostarted(self.heartbeat.worker_id)
            # Reclaim leases of dead workers at once, before taking any new work.
            self.reconcile_job(None, time.time())
            self.scheduler.start()
            self.snapshots.start()
            self._consume()
        finally:
            if watcher is not None:
                watcher.stop()
            self.scheduler.stop()
            self.snapshots.stop()
            self.heartbeat.stop()
            pid_path.unlink(missing_ok=True)
            self.store.close()
            log.info("worker %s stopped", self.heartbeat.worker_id)
        return 0

    _stop_requested = False

    def _stop_before_consuming(self, signum, frame) -> None:
        """SIGTERM while starting: stop as soon as the consumer runs (it sees the flag)."""
        self._stop_requested = True
        if self._consumer is not None:
            self._consumer.stop_flag.set()

    def _consume(self) -> None:
        start = self.live.at_start
        consumer = self.huey.create_consumer(
            workers=start.worker.threads, worker_type="thread", periodic=False,
            initial_delay=start.worker.poll_interval_s, backoff=1.0,
            max_delay=start.worker.poll_interval_s, graceful_signal="TERM")
        self._consumer = consumer
        if self._stop_requested:
            consumer.stop_flag.set()
        # The stop flag ends the consumer's loop and each worker thread after its job.
        self.idle.begin(on_idle=consumer.stop_flag.set)
        log.info("worker %s (pid %d%s) consuming %s", self.heartbeat.worker_id, os.getpid(),
                 ", autostarted" if self.autostarted else "",
                 describe_queue(start.storage, start.queue))
        try:
            consumer.run()
        finally:
            self.idle.end()
            for _, thread in consumer.worker_threads:  # joined already after a signal
                if thread.is_alive():
                    thread.join()


class IdleWatch:
    """An autostarted worker's idle exit while it consumes, following worker.idle_exit_s
    (0 = never): a changed value replaces the watcher, which keeps when it last saw a front."""

    def __init__(self, service: WorkerService):
        self.service = service
        self._lock = threading.Lock()
        self._exit: IdleExit | None = None
        self._on_idle: Callable[[], None] | None = None

    def begin(self, on_idle: Callable[[], None]) -> None:
        with self._lock:
            self._on_idle = on_idle
            self._replace(self.service.live.now.worker.idle_exit_s)

    def follow(self, idle_s: float) -> None:
        with self._lock:
            if self._on_idle is not None and (self._exit is None or self._exit.idle_s != idle_s):
                self._replace(idle_s)

    def end(self) -> None:
        with self._lock:
            self._on_idle = None
            self._replace(0)

    def _replace(self, idle_s: float) -> None:
        old, self._exit = self._exit, None
        if old is not None:
            old.stop()
        service = self.service
        if not service.autostarted or idle_s <= 0 or self._on_idle is None:
            return
        self._exit = IdleExit(service.store, service.heartbeat.worker_id, idle_s,
                              service.live.at_start.worker.heartbeat_timeout_s, on_idle=self._on_idle)
        if old is not None:
            self._exit.last_front_seen = old.last_front_seen
        self._exit.start()


def _warn_foreign_vectors(store: Store, embedder) -> None:
    try:
        message = store.vectors.foreign_space_warning(embedder.model, embedder.dim)
    except Exception as exc:  # the embedder may be unreachable now; stages will retry it
        log.warning("cannot check stored vectors against the embedder: %s", exc)
        return
    if message:
        log.warning(message)
