"""The tools that operate the store: memory_maintenance and memory_stats. Each is
`tool(deps, **arguments)`."""

from __future__ import annotations

import os
import time
from pathlib import Path

from aokun_server.params import Action
from aokun_server.tooling import described
from aokun_server.tools.deps import ToolDeps
from shared.access import check_admin
from shared.api.figures import pipeline_figures, summarizer_figures
from shared.api.models import DocumentCounts, MaintenanceResult, StageProblem, StatsResult
from shared.lifecycle import run_action

# Failed and stuck stages memory_stats names (queue.failed counts them all).
PROBLEMS_LISTED = 20


# Archives memories and expires / forgets / purges atoms; each backup is a new file.
@described("Run memory upkeep", destructive=True)
def memory_maintenance(deps: ToolDeps, action: Action) -> MaintenanceResult:
    """Run upkeep now instead of waiting for the worker's schedule; call it only when the
    user or an operator asks. decay (importance decay due since the last run), archive
    (old and unimportant memories leave recall), atoms (expire / forget / purge atoms past
    their time), backup, reconcile (re-queue unfinished work), or all. Reports what each
    step changed."""
    check_admin(deps.principal(), "memory_maintenance")
    changed = run_action(action, deps.lifecycle, deps.reconcile_queue, time.time())
    return MaintenanceResult(action=action, changed=changed)


@described("Memory statistics", read_only=True)
def memory_stats(deps: ToolDeps) -> StatsResult:
    """Counts of memories, background work (pending, failed stages), vectors and rows in
    every table, with warnings; problems names each failed or stuck stage's memory and
    its error. Call it to check the memory server's health, or why a new memory is not
    found by meaning yet (its vector still waits for a worker)."""
    check_admin(deps.principal(), "memory_stats")
    store, live = deps.store, deps.live
    path = Path(store.location)
    size = sum(os.path.getsize(p) for p in (path, path.with_name(path.name + "-wal"))
               if p.exists())
    figures = pipeline_figures(store, deps.index, live.now.worker)
    problems = [StageProblem(**p) for p in store.stages.stage_problems(time.time(), PROBLEMS_LISTED)]
    return StatsResult(documents=DocumentCounts(**store.documents.stats()), tables=store.consistency.table_counts(),
                       database={"path": store.location, "size_bytes": size},
                       summarizer=summarizer_figures(store, live.now.summarizer), problems=problems,
                       **figures)
