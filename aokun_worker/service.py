"""The worker process, wired: heartbeat, stage runner, reconciler, periodic jobs, Huey consumer."""

from __future__ import annotations

import logging
import os
import signal
import time
from functools import partial

from aokun_worker.handlers import AtomsHandler, EmbedHandler, GraphHandler
from aokun_worker.heartbeat import Heartbeat
from aokun_worker.periodic import PeriodicJob, PeriodicScheduler
from aokun_worker.runner import RunnerParts, StageRunner
from shared import health
from shared.config import AppConfig
from shared.decay import DAY
from shared.lifecycle import Lifecycle
from shared.memories import MemoryService
from shared.embedders import build_embedder
from shared.extract.atoms import AtomRules, ttl_days
from shared.extract.graph_rules import GraphBuilder
from shared.queue import open_queue
from shared.reconcile import reconcile
from shared.store import fts, runtime, vectors
from shared.store.db import Database
from shared.store.documents import DocumentStore
from shared.store.schema import open_database
from shared.tasks import Enqueuer
from shared.text.segment import Segmenter

log = logging.getLogger("aokun.worker")

HOUSEKEEPING_INTERVAL_S = 3600.0
TOMBSTONE_KEEP_S = 86_400.0


class WorkerService:
    """One worker process: everything it runs, built from the config once."""

    def __init__(self, config: AppConfig, db: Database, huey, autostarted: bool = False):
        self.config = config
        self.db = db
        self.huey = huey
        self.autostarted = autostarted
        self.heartbeat = Heartbeat(db, config.worker.heartbeat_interval_s)
        self.embedder = build_embedder(config.embedding, threads=config.embedding.threads)
        segmenter = Segmenter(config.text)
        rules = AtomRules.load(config.atoms.rules_file)
        handlers = {
            "embed": EmbedHandler(self.embedder, config.queue.embed_batch_size),
            "atoms": AtomsHandler(rules, segmenter, config.atoms),
            "graph": GraphHandler(db, GraphBuilder(segmenter, config.graph), self.embedder),
        }
        parts = RunnerParts(db=db, documents=DocumentStore(db),
                            handlers=handlers, queue=config.queue, owner=self.heartbeat.worker_id)
        runner = StageRunner(parts)
        self.enqueuer = Enqueuer(huey, processor=runner.process)
        runner.enqueuer = self.enqueuer
        self.lifecycle = Lifecycle(config, db)
        # Only for repairs at start (BM25 rows back-filled); memories are written by fronts.
        self.memories = MemoryService(db, segmenter, None, partial(ttl_days, config=config.atoms))
        f = config.forgetting
        jobs = [
            PeriodicJob("reconcile", config.queue.reconcile_interval_s, self.reconcile_job),
            PeriodicJob("housekeeping", HOUSEKEEPING_INTERVAL_S, self.housekeeping_job),
            # Hourly: the job itself applies every daily decay that fell due (catch-up).
            PeriodicJob("decay", HOUSEKEEPING_INTERVAL_S, lambda prev, now: str(self.lifecycle.decay(now))),
            PeriodicJob("archive", DAY, lambda prev, now: str(self.lifecycle.archive(now))),
            PeriodicJob("atoms", f.atom_maintenance_interval_hours * 3600,
                        lambda prev, now: str(self.lifecycle.sweep_atoms(now))),
        ]
        if config.backup.daily:
            jobs.append(PeriodicJob("backup", DAY, lambda prev, now: str(self.lifecycle.backup(now, "daily"))))
        self.scheduler = PeriodicScheduler(db, jobs)

    @classmethod
    def open(cls, config: AppConfig, autostarted: bool = False) -> "WorkerService":
        """Build the worker; `autostarted` (a front started it) lets it exit when idle."""
        service = cls(config, open_database(config.storage), open_queue(config.storage), autostarted)
        _warn_foreign_vectors(service.db, service.embedder)
        restored = service.memories.backfill_fts()
        if restored:
            log.warning("back-filled %d missing BM25 rows", restored)
        upgraded = service.lifecycle.backup_if_version_changed(time.time())
        if upgraded:
            log.info("new version: full backup written to %s", upgraded["path"])
        return service

    def reconcile_job(self, previous: float | None, now: float) -> str:
        report = reconcile(self.db, self.enqueuer, self.config.worker.heartbeat_timeout_s,
                           queue=self.config.queue)
        return f"{report.reclaimed} reclaimed, {report.enqueued} queued"

    def housekeeping_job(self, previous: float | None, now: float) -> str:
        with self.db.write() as tx:
            pruned = vectors.prune_tombstones(tx, now - TOMBSTONE_KEEP_S)
            gone = runtime.prune_workers(tx, now - TOMBSTONE_KEEP_S)
            fronts = runtime.prune_fronts(tx, now - TOMBSTONE_KEEP_S)
        # Words that edits and re-run stages replaced leave the full-text indexes (deletes
        # drop theirs at once; on SQLite < 3.44 doing so per edit would rewrite the index).
        with self.db.write() as tx:
            fts.scrub_terms(tx, fts.FTS_TABLES)
        fts.flush_deleted(self.db.connection())
        return (f"{pruned} vector tombstones, {gone} dead worker rows and {fronts} dead front rows"
                " pruned; replaced words scrubbed from the full-text indexes")

    def run(self) -> int:
        """Consume until SIGTERM or SIGINT (both let running jobs finish) or, for an
        autostarted worker, until it has been idle for worker.idle_exit_s."""
        # Huey installs its graceful SIGTERM handler only when the consumer starts; a SIGTERM
        # before that (honcho stopping a worker that is still starting) must not kill us.
        self._consumer = None
        signal.signal(signal.SIGTERM, self._stop_before_consuming)
        self.heartbeat.start()
        pid_path = health.write_pid_file(self.config.storage.data_dir)
        try:
            if self.autostarted:
                with self.db.write() as tx:
                    runtime.mark_autostarted(tx, self.heartbeat.worker_id)
            # Reclaim leases of dead workers at once, before taking any new work.
            self.reconcile_job(None, time.time())
            self.scheduler.start()
            self._consume()
        finally:
            self.scheduler.stop()
            self.heartbeat.stop()
            pid_path.unlink(missing_ok=True)
            self.db.close()
            log.info("worker %s stopped", self.heartbeat.worker_id)
        return 0

    _stop_requested = False

    def _stop_before_consuming(self, signum, frame) -> None:
        """SIGTERM while starting: stop as soon as the consumer runs (it sees the flag)."""
        self._stop_requested = True
        if self._consumer is not None:
            self._consumer.stop_flag.set()

    def _consume(self) -> None:
        consumer = self.huey.create_consumer(
            workers=self.config.worker.threads, worker_type="thread", periodic=False,
            initial_delay=self.config.worker.poll_interval_s, backoff=1.0,
            max_delay=self.config.worker.poll_interval_s, graceful_signal="TERM")
        self._consumer = consumer
        if self._stop_requested:
            consumer.stop_flag.set()
        idle = None
        if self.autostarted and self.config.worker.idle_exit_s > 0:
            # The stop flag ends the consumer's loop and each worker thread after its job.
            idle = health.IdleExit(self.db, self.heartbeat.worker_id, self.config.worker.idle_exit_s,
                                   self.config.worker.heartbeat_timeout_s, on_idle=consumer.stop_flag.set)
            idle.start()
        log.info("worker %s (pid %d%s) consuming %s", self.heartbeat.worker_id, os.getpid(),
                 ", autostarted" if self.autostarted else "", self.config.storage.queue_path)
        try:
            consumer.run()
        finally:
            if idle is not None:
                idle.stop()
            for _, thread in consumer.worker_threads:  # joined already after a signal
                if thread.is_alive():
                    thread.join()


def _warn_foreign_vectors(db: Database, embedder) -> None:
    try:
        message = vectors.foreign_space_warning(db.connection(), embedder.model, embedder.dim)
    except Exception as exc:  # the embedder may be unreachable now; stages will retry it
        log.warning("cannot check stored vectors against the embedder: %s", exc)
        return
    if message:
        log.warning(message)
