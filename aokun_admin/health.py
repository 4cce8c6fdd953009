"""The admin commands about health: doctor (is everything consistent, will every stage get
done), status (who is alive) and stop (stop this data_dir's workers), and how this data_dir's
worker processes on this host are found and stopped."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

from shared import platform
from shared.catch_up import catch_up, read_catch_up
from shared.config import AppConfig
from shared.embedders import build_embedder, recorded_models, space_dim
from shared.pipeline_warnings import format_age, pipeline_warnings
from shared.queue import describe_queue, queue_file_problem, redis_problem
from shared.store.model.runtime import ProcessRow
from shared.store.model.stages import EMBED
from shared.worker_pid_files import read_pid_files

# Lazy imports: tqdm loads only for `aokun status --follow`.

# How often `aokun status --follow` reads the stage rows: the bar moves about as often as a
# worker finishes a batch, and two cheap reads a second cost the store nothing.
FOLLOW_POLL_S = 0.5


def cmd_doctor(admin, args) -> int:
    """Report every inconsistency found, and stages that will not get done by themselves;
    exit status 1 if there is any."""
    store = admin.store
    problems = []
    counts = store.consistency.table_counts()
    if counts["documents"] != counts["documents_fts"]:
        problems.append(f"{counts['documents']} documents but {counts['documents_fts']} BM25 rows")
    embedder_model, dim = embedder_space(admin.config, store)
    for name, ids in store.consistency.missing_outputs(embedder_model).items():
        if ids:
            problems.append(f"{len(ids)} memories lack {name} (e.g. {', '.join(map(str, ids[:5]))})")
    warning = store.vectors.foreign_space_warning(embedder_model, dim)
    if warning:
        problems.append(warning)
    engine, queue_problem = _queue_engine(admin.config)
    if queue_problem:
        problems.append(queue_problem)
    pipeline, details = _pipeline_health(admin)
    print(f"documents {counts['documents']}, stages pending {pipeline['queue']['pending']}, running "
          f"{pipeline['queue']['running']}, failed {pipeline['queue']['failed']}, done {pipeline['queue']['done']}")
    print(f"store engine: {store.engine} at {store.location}, reachable")
    print(f"queue engine: {engine}")
    for problem in problems + pipeline["warnings"]:
        print(f"PROBLEM: {problem}")
    for line in details:
        print(f"  {line}")
    found = len(problems) + len(pipeline["warnings"])
    print("consistent" if not found else f"{found} problem(s) found")
    return 0 if not found else 1


def _queue_engine(config: AppConfig) -> tuple[str, str | None]:
    """Which queue engine this config uses and whether it works: the Redis server answers a
    PING, the SQLite queue file is not damaged. (description, problem or None)"""
    described = describe_queue(config.storage, config.queue)
    if config.queue.backend == "redis":
        problem = redis_problem(config.queue)
        return f"{described}, {'unreachable' if problem else 'reachable (PING answered)'}", problem
    problem = queue_file_problem(config.storage)
    return f"{described}{', damaged' if problem else ''}", problem


def _pipeline_health(admin, detail_limit: int = 20) -> tuple[dict, list[str]]:
    """Queue figures, live workers and fronts, warnings (shared/pipeline_warnings.py), and one line per
    failed or stuck stage (the first detail_limit)."""
    now = time.time()
    alive_since = now - admin.config.worker.heartbeat_timeout_s
    with admin.store.read() as s:
        queue = s.stages.queue_figures(now)
        workers = [row for row in s.runtime.worker_rows() if row.alive(alive_since)]
        newest = s.runtime.newest_heartbeat()
        fronts = s.runtime.live_fronts(alive_since)
        problems = s.stages.stage_problems(now, detail_limit)
    details = [f"memory {p['memory_id']}: {p['stage']} stage {p['status']} after {p['attempts']} "
               f"attempt(s): {p['last_error']}" for p in problems]
    if len(problems) == detail_limit:
        details.append(f"... (first {detail_limit} shown; `aokun repair` lists every failed stage)")
    return {"queue": queue, "workers": workers, "fronts": fronts,
            "warnings": pipeline_warnings(queue, len(workers), newest, now)}, details


def cmd_status(admin, args) -> int:
    """Live workers and fronts of this data_dir, the queue, and what is wrong with it."""
    pipeline, _ = _pipeline_health(admin)
    now = time.time()
    print(f"data_dir: {admin.config.storage.data_dir}")
    rows = admin.store.runtime.worker_rows()
    unseen = {pid: kind for pid, kind in local_workers(
        admin.config.storage.data_dir, rows, now - admin.config.worker.heartbeat_timeout_s).items()
        if pid not in {row.pid for row in pipeline["workers"]}}
    last = _last_worker(rows, pipeline["workers"] or list(unseen), admin.store.runtime.last_worker_gone(), now)
    print(f"workers: {len(pipeline['workers'])} alive{last}")
    for row in pipeline["workers"]:
        print(f"  {_describe(row, now)}")
    for pid, kind in unseen.items():
        print(f"  pid {pid} ({kind})")
    print(f"fronts: {len(pipeline['fronts'])} alive")
    for row in pipeline["fronts"]:
        print(f"  {_describe(row, now)}")
    queue = pipeline["queue"]
    print(f"queue: {queue['pending']} pending, {queue['running']} running, {queue['failed']} failed, "
          f"{queue['done']} done; oldest pending {format_age(queue['oldest_pending_age_s'])}")
    print(catch_up(admin.store, admin.config.worker.heartbeat_timeout_s).line())
    for warning in pipeline["warnings"]:
        print(f"WARNING: {warning}")
    return follow(admin) if args.follow else 0


def follow(admin) -> int:
    """A progress bar on stderr of memories becoming searchable by meaning, from the
    start: the memories embedded since then out of those and the ones still waiting (new
    memories raise the total), with the estimate beside it; then the line of `aokun status`.
    0 once none waits; 130 when stopped with Ctrl-C."""
    from tqdm import tqdm

    timeout = admin.config.worker.heartbeat_timeout_s
    started = time.time()
    found = catch_up(admin.store, timeout, started)
    bar = tqdm(desc="searchable by meaning", total=found.embed.waiting, unit="memory", file=sys.stderr,
               mininterval=0, postfix=found.estimate())
    try:
        while found.embed.waiting:
            time.sleep(FOLLOW_POLL_S)  # the pace of the reads, not a wait for a state
            now = time.time()
            with admin.store.read() as s:
                found = read_catch_up(s, now, timeout)
                done = s.stages.done_since(EMBED, started)
            bar.total, bar.n = done + found.embed.waiting, done
            bar.set_postfix_str(found.estimate(), refresh=False)
            bar.refresh()
    except KeyboardInterrupt:
        bar.close()
        print(catch_up(admin.store, timeout).line())
        return 130
    bar.close()
    print(found.line())
    return 0


def _last_worker(rows, alive, gone: float | None, now: float) -> str:
    """With no worker alive (nor a worker process of this data_dir without a fresh beat), what
    became of the last one: stopped (its row went; when), or gone quiet (killed or hung: its
    row stays; its last beat), or none ever ran here."""
    if alive:
        return ""
    quiet = max(rows, key=lambda row: row.heartbeat_time, default=None)
    if quiet is not None and (gone is None or quiet.heartbeat_time > gone):
        return (f"; the last one (pid {quiet.pid} on {quiet.hostname}, {quiet.kind}) last beat "
                f"{format_age(now - quiet.heartbeat_time)} ago, at {_clock(quiet.heartbeat_time)}")
    if gone is not None:
        return f"; the last one stopped {format_age(now - gone)} ago, at {_clock(gone)}"
    return "; no worker has ever run on this store"


def _clock(when: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))


def _describe(row, now: float) -> str:
    return (f"pid {row.pid} on {row.hostname}, {row.kind}, started {_clock(row.started_time)} "
            f"({format_age(now - row.started_time)} ago), heartbeat {format_age(now - row.heartbeat_time)} ago")


def cmd_stop(admin, args) -> int:
    """SIGTERM this data_dir's workers on this host (each finishes its running job), wait."""
    data_dir = admin.config.storage.data_dir
    rows = admin.store.runtime.worker_rows()
    targets = local_workers(data_dir, rows, time.time() - admin.config.worker.heartbeat_timeout_s)
    if not targets:
        print(f"no worker of {data_dir} is running on this host")
        return 0
    print(f"stopping {len(targets)} worker(s) of {data_dir}: "
          + ", ".join(f"pid {pid} ({kind})" for pid, kind in targets.items()), flush=True)
    running = stop_processes(list(targets), args.timeout)
    for pid, kind in targets.items():
        print(f"{'still running' if pid in running else 'stopped'}: worker pid {pid} ({kind})")
    if running:
        print(f"aokun stop: {len(running)} worker(s) still running after {args.timeout:.0f} s; "
              "wait for their jobs, or kill them (stage rows make that safe)", file=sys.stderr)
        return 1
    return 0


def embedder_space(config: AppConfig, s) -> tuple[str, int]:
    """The configured vector space; `local_model: auto` resolves to the space this store
    keeps, as its worker and front do (`s`: the store or a session of it)."""
    embedder = build_embedder(config.embedding, threads=1, recorded=recorded_models(s))
    dim = space_dim(config.embedding, embedder)
    return embedder.model, dim


# -- this data_dir's worker processes on this host ------------------------------------------

def local_workers(data_dir: Path, rows: list[ProcessRow], alive_since: float) -> dict[int, str]:
    """{pid: what it is} of this data_dir's worker processes on this host: those with a fresh
    heartbeat row, and those whose pid file names a live aokun-worker (one that has not beaten
    yet, or hangs). Pid files of processes that are gone are removed."""
    here = socket.gethostname()
    found = {row.pid: row.kind + (", stopping" if row.stopping else "")
             for row in rows if row.hostname == here and row.heartbeat_time >= alive_since
             and platform.pid_alive(row.pid)}
    for pid, path in read_pid_files(data_dir).items():
        if not platform.pid_alive(pid):
            path.unlink(missing_ok=True)
        elif pid not in found and _is_worker_of(pid, data_dir):
            found[pid] = "no fresh heartbeat"
    return found


def _is_worker_of(pid: int, data_dir: Path) -> bool:
    # A pid file can outlive its worker and its pid be reused: trust it only for a process
    # whose command line is an aokun-worker's (and names this data_dir, if it names one).
    args = platform.command_line(pid)
    if not args or not any("aokun_worker" in a or a.endswith("aokun-worker") for a in args):
        return False
    if "--data-dir" in args[:-1]:
        return Path(args[args.index("--data-dir") + 1]).resolve() == data_dir.resolve()
    return True


def stop_processes(pids: list[int], timeout_s: float) -> list[int]:
    """Ask each process to stop and wait up to timeout_s; return those still running."""
    for pid in pids:
        platform.terminate(pid)
    deadline = time.monotonic() + timeout_s
    running = [pid for pid in pids if platform.pid_alive(pid)]
    while running and time.monotonic() < deadline:
        time.sleep(0.1)
        running = [pid for pid in running if platform.pid_alive(pid)]
    return running
