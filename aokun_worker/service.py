"""The worker process, wired: heartbeat, stage runner, reconciler, periodic jobs, Huey consumer."""

from __future__ import annotations

import logging
import time

from aokun_worker.handlers import AtomsHandler, EmbedHandler, GraphHandler
from aokun_worker.heartbeat import Heartbeat
from aokun_worker.periodic import PeriodicJob, PeriodicScheduler
from aokun_worker.runner import RunnerParts, StageRunner
from shared.config import AppConfig
from shared.decay import DAY
from shared.lifecycle import Lifecycle
from shared.embedders import build_embedder
from shared.extract.atoms import AtomRules
from shared.extract.graph_rules import GraphBuilder
from shared.queue import open_queue
from shared.reconcile import reconcile
from shared.store import runtime, vectors
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

    def __init__(self, config: AppConfig, db: Database, huey):
        self.config = config
        self.db = db
        self.huey = huey
        self.heartbeat = Heartbeat(db, config.worker.heartbeat_interval_s)
        self.embedder = build_embedder(config.embedding, threads=config.embedding.threads)
        segmenter = Segmenter(config.text)
        rules = AtomRules.load(config.atoms.rules_file)
        handlers = {
            "embed": EmbedHandler(self.embedder, config.queue.embed_batch_size),
            "atoms": AtomsHandler(rules, segmenter, config.atoms),
            "graph": GraphHandler(rules, GraphBuilder(segmenter, config.graph), self.embedder, config.atoms),
        }
        parts = RunnerParts(db=db, documents=DocumentStore(db, segmenter),
                            handlers=handlers, queue=config.queue, owner=self.heartbeat.worker_id)
        runner = StageRunner(parts)
        self.enqueuer = Enqueuer(huey, processor=runner.process)
        runner.enqueuer = self.enqueuer
        self.lifecycle = Lifecycle(config, db, parts.documents)
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
    def open(cls, config: AppConfig) -> "WorkerService":
        service = cls(config, open_database(config.storage), open_queue(config.storage))
        _warn_foreign_vectors(service.db, service.embedder)
        restored = service.lifecycle.documents.backfill_fts()
        if restored:
            log.warning("back-filled %d missing BM25 rows", restored)
        upgraded = service.lifecycle.backup_if_version_changed(time.time())
        if upgraded:
            log.info("new version: full backup written to %s", upgraded["path"])
        return service

    def reconcile_job(self, previous: float | None, now: float) -> str:
        report = reconcile(self.db, self.enqueuer, self.config.worker.heartbeat_timeout_s)
        return f"{report.reclaimed} reclaimed, {report.enqueued} queued"

    def housekeeping_job(self, previous: float | None, now: float) -> str:
        with self.db.write() as tx:
            pruned = vectors.prune_tombstones(tx, now - TOMBSTONE_KEEP_S)
            gone = runtime.prune_workers(tx, now - TOMBSTONE_KEEP_S)
        return f"{pruned} vector tombstones and {gone} dead worker rows pruned"

    def run(self) -> int:
        """Consume until SIGTERM or SIGINT; both let running jobs finish."""
        self.heartbeat.start()
        # Reclaim leases of dead workers at once, before taking any new work.
        self.reconcile_job(None, time.time())
        self.scheduler.start()
        consumer = self.huey.create_consumer(
            workers=self.config.worker.threads, worker_type="thread", periodic=False,
            initial_delay=self.config.worker.poll_interval_s, backoff=1.0,
            max_delay=self.config.worker.poll_interval_s, graceful_signal="TERM")
        log.info("worker %s consuming %s", self.heartbeat.worker_id, self.config.storage.queue_path)
        try:
            consumer.run()
        finally:
            self.scheduler.stop()
            self.heartbeat.stop()
            self.db.close()
            log.info("worker %s stopped", self.heartbeat.worker_id)
        return 0


def _warn_foreign_vectors(db: Database, embedder) -> None:
    try:
        message = vectors.foreign_space_warning(db.connection(), embedder.model, embedder.dim)
    except Exception as exc:  # the embedder may be unreachable now; stages will retry it
        log.warning("cannot check stored vectors against the embedder: %s", exc)
        return
    if message:
        log.warning(message)
