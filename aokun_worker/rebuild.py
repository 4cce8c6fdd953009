"""Re-embedding every memory by hand (`aokun rebuild-index`, which starts aokun_worker.main).

It claims embed stages exactly as a running worker does (the same StageRunner and handlers,
with a heartbeat so that workers' reconcilers leave its leases alone), so a worker running
beside it shares the work instead of fighting over it. The graph stages that read the new
vectors (their entries take the vectors of the passages holding their facts) run after.
"""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

from aokun_worker.handlers import EmbedHandler, GraphHandler
from aokun_worker.heartbeat import Heartbeat
from aokun_worker.runner import RunnerParts, StageRunner
from shared.assembly import Services
from shared.extract.graph_rules import GraphBuilder


def rebuild_index(services: Services) -> int:
    """Drop vectors of other models, restart every embed stage and run them all here, with a
    progress bar on stderr; the last line says how many memories have vectors."""
    config, store, embedder = services.live.at_start, services.store, services.embedder
    dim = embedder.dim
    with store.write() as tx:
        now = time.time()
        dropped = tx.vectors.delete_foreign(embedder.model, dim, now)
        total = tx.stages.restart_stage("embed", now)
    print(f"re-embedding {total} memories with {embedder.model} ({dim} dims); "
          f"{dropped} vectors of other models removed", file=sys.stderr)
    heartbeat = Heartbeat(store, config.worker.heartbeat_interval_s)
    heartbeat.start()
    graph = GraphHandler(store, GraphBuilder(services.segmenter, config.graph), embedder.model)
    runner = StageRunner(RunnerParts(
        store=store, handlers={"embed": EmbedHandler(embedder, config.embedding.batch_size, store), "graph": graph},
        queue=config.queue, owner=heartbeat.worker_id))
    try:
        for stage, total_of_stage in (("embed", total), ("graph", None)):
            if not _run_all(runner, stage, total_of_stage):
                print(f"the {stage} stage failed; workers will retry the remaining stages", file=sys.stderr)
                return 1
    finally:
        heartbeat.stop()
    print(f"rebuilt: {store.vectors.documents_with_vector(embedder.model, dim)} "
          "memories have vectors")
    return 0


def _run_all(runner: StageRunner, stage: str, total: int | None) -> bool:
    """Run every claimable row of a stage here, with a progress bar on a terminal; False when a
    batch failed."""
    with tqdm(total=total, unit="memory", desc=stage, file=sys.stderr, disable=None) as bar:
        while True:
            claimed, done = runner.run_next(stage)
            if not claimed:
                return True
            if not done:
                return False
            bar.update(claimed)
