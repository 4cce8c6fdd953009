#!/usr/bin/env python3
"""Load benchmark: concurrent MCP clients over streamable HTTP against one or two fronts and one worker.

Seeds N memories (LoCoMo and MADial rows from ../shared/bench/data, read at run time; generated
text without them) through the memory service directly, lets a real aokun-worker process them
(vectors, atoms, graph), then runs C client threads, each with the official MCP client, for
--duration seconds: a share of recall calls with real questions (the last line of a dialogue,
scoped to the question's own group as persona_id) and memorize calls of new texts otherwise.
The worker keeps processing what is memorized meanwhile, as in real use. Default config (recall
cache on, synchronous full). Prints p50 / p95 / p99 per tool, throughput and errors by message.
Everything talks to 127.0.0.1 only and stops by itself.

--backend postgresql puts the store on a database of its own on --pg's server (scripts/
bench_servers.py: dropped at the end unless --work keeps it) and the queue on the local Redis
under a queue name of the run's own (its keys, and only those, are deleted at the end).
--fronts 2 starts two HTTP fronts, each with a data_dir of its own (on SQLite both open the
one store file of the work folder), and spreads the clients across them. While the load runs
the CPU time of each process (fronts, worker, this client process, the PostgreSQL backends of
the run's database, every postgres and redis-server process, the whole machine) is read from
/proc, and on PostgreSQL the run's sessions are sampled: how many run a statement and how many
wait for the write lock (the advisory lock every write transaction takes).

    .venv/bin/python scripts/bench_load.py [--memories 2000] [--clients 8] [--duration 30]
                                           [--recall-share 0.8] [--work DIR]
                                           [--backend sqlite|postgresql] [--fronts 1|2]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path

import anyio
import yaml
from mcp import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_servers import DEFAULT_SERVER, bench_database  # noqa: E402
from chaos import ClientLoop, Service, drain, error_key, free_port  # noqa: E402

DATA = ROOT.parent / "shared" / "bench" / "data"
SOURCES = ("locomo_dev", "madial_en_dev", "madial_zh_dev")
PROCESS_TIMEOUT_S = 1800.0  # the worker must have processed the seeded memories within this
REDIS_URL = "redis://127.0.0.1:6379/0"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def corpus() -> tuple[list[dict], list[tuple[str, str]]]:
    """Memory rows and (question, group) pairs, shuffled the same way every run."""
    rows, questions = [], []
    for name in SOURCES:
        if (DATA / f"{name}.memories.jsonl").exists():
            rows += [json.loads(x) for x in (DATA / f"{name}.memories.jsonl").open(encoding="utf-8")]
            for line in (DATA / f"{name}.queries.jsonl").open(encoding="utf-8"):
                query = json.loads(line)
                questions.append((query["question"].strip().split("\n")[-1][-300:], query["group"]))
    if not rows:
        words = "tea coffee garden 花生 过敏 杭州 体检 project review cat 跑步 西湖 meeting".split()
        rows = [{"content": " ".join(words[(i * 7 + j) % len(words)] for j in range(12)),
                 "group": f"g{i % 5}"} for i in range(3000)]
        questions = [(" ".join(words[(i + j) % len(words)] for j in range(3)), f"g{i % 5}") for i in range(300)]
    rng = random.Random(0)
    rng.shuffle(rows)
    rng.shuffle(questions)
    return rows, questions


def memory_of(row: dict, suffix: str) -> tuple[str, dict]:
    """(content, metadata) as a host would memorize the row."""
    metadata = {"persona_id": row["group"]}
    if row.get("participants"):
        metadata["participants"] = list(row["participants"])
    if row.get("time"):
        metadata["original_time"] = row["time"]
    return f"{row['content']}{suffix}", metadata


def seed(config_path: Path, size: int, rows: list[dict]) -> int:
    """Bring the store up to `size` memories in batches of one transaction each, through the
    memory service without a queue: the worker's reconciler queues their stages at its start.
    Return how many were added."""
    from shared.assembly import Services
    from shared.config import load_config
    from shared.live_config import LiveConfig
    from shared.store import open_store
    from shared.store.model.documents import MemoryFields

    config = load_config(config_path)
    store = open_store(config.storage)
    try:
        service = Services(LiveConfig(config), store, queued=False).memories
        have = start = store.documents.count()
        while have < size:
            batch = []
            for i in range(have, min(size, have + 500)):
                content, meta = memory_of(rows[i % len(rows)], f" #{i}" if i >= len(rows) else "")
                original = meta.get("original_time")
                batch.append((content, MemoryFields(
                    persona_id=meta["persona_id"], participants=tuple(meta.get("participants", ())),
                    original_time=datetime.fromisoformat(original) if original else None)))
            have += len(service.memorize_many(batch))
        return have - start
    finally:
        store.close()


class Latencies:
    """Per tool: answer times of the calls answered, and failures by message."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ms: dict[str, list[float]] = collections.defaultdict(list)
        self.errors: collections.Counter = collections.Counter()

    def on_result(self, tool: str, arguments: dict, result, ms: float) -> None:
        with self.lock:
            if result.is_error:
                self.errors[f"{tool}: {error_key(result.content[0].text)}"] += 1
            else:
                self.ms[tool].append(ms)

    def on_failure(self, tool: str | None, arguments: dict, message: str, ms: float) -> None:
        with self.lock:
            self.errors[f"{tool or 'session'}: {message}"] += 1


class Mix:
    """One client's calls: recall a real question (share `recall_share`) or memorize a row."""

    def __init__(self, client: int, rows: list[dict], questions: list[tuple[str, str]],
                 recall_share: float, seed: int):
        self.client, self.rows, self.questions = client, rows, questions
        self.recall_share, self.rng, self.seq = recall_share, random.Random(seed), 0

    def next_call(self) -> tuple[str, dict]:
        if self.rng.random() < self.recall_share:
            question, group = self.rng.choice(self.questions)
            return "recall", {"query": question, "k": 10, "persona_id": group}
        self.seq += 1
        content, metadata = memory_of(self.rng.choice(self.rows), f" (load c{self.client} #{self.seq})")
        return "memorize", {"content": content, "metadata": metadata}


async def warm_up(url: str, question: str) -> None:
    """One recall first, so the front's query model is loaded before the clock starts."""
    with anyio.fail_after(300):
        async with Client(url) as client:
            result = await client.call_tool("recall", {"query": question})
            if result.is_error:
                raise RuntimeError(f"warm-up recall failed: {result.content[0].text}")


def load(urls: list[str], args, rows: list[dict], questions: list[tuple[str, str]]) -> tuple[Latencies, float]:
    """C clients for args.duration seconds, client i on front i mod len(urls); return what
    they saw and the seconds it took."""
    seen, stop = Latencies(), threading.Event()
    clients = [ClientLoop(urls, i % len(urls), stop, Mix(i, rows, questions, args.recall_share, i).next_call,
                          seen.on_result, seen.on_failure) for i in range(args.clients)]
    started = time.perf_counter()
    for client in clients:
        client.thread.start()
    stop.wait(args.duration)
    stop.set()
    for client in clients:
        client.thread.join(timeout=60)
    return seen, time.perf_counter() - started


def percentiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return (values[0],) * 3 if values else (float("nan"),) * 3
    q = statistics.quantiles(values, n=100, method="inclusive")
    return q[49], q[94], q[98]


def report(seen: Latencies, elapsed: float) -> None:
    print("\n| tool | calls answered | p50 | p95 | p99 | calls/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for tool in sorted(seen.ms, key=lambda t: -len(seen.ms[t])):
        p50, p95, p99 = percentiles(seen.ms[tool])
        print(f"| {tool} | {len(seen.ms[tool]):,} | {p50:.0f} ms | {p95:.0f} ms | {p99:.0f} ms | "
              f"{len(seen.ms[tool]) / elapsed:.1f} |")
    answered = sum(len(v) for v in seen.ms.values())
    print(f"\nthroughput: {answered / elapsed:.1f} calls/s answered over {elapsed:.1f} s")
    print(f"errors: {sum(seen.errors.values())}")
    for message, count in seen.errors.most_common():
        print(f"  {count:6d}  {message}")


def host_configs(work: Path, args, url: str, queue_name: str) -> list[Path]:
    """One config per front (the worker uses the first). SQLite: one config, data_dir in the work
    folder, for every process. PostgreSQL: a folder per front with a data_dir of its own, the
    store at `url`, the queue on Redis under `queue_name`."""
    if args.backend == "sqlite":
        config = work / "config.yaml"
        if not config.exists():
            config.write_text("storage:\n  data_dir: data\nworker:\n  autostart: false\n")
        return [config] * args.fronts
    configs = []
    for host in ("host-a", "host-b")[:args.fronts]:
        folder = work / host
        folder.mkdir(parents=True, exist_ok=True)
        raw = {"storage": {"backend": "postgresql", "url": url, "data_dir": str(folder / "data")},
               "worker": {"autostart": False},
               "queue": {"backend": "redis", "url": REDIS_URL, "name": queue_name}}
        path = folder / "config.yaml"
        path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
        configs.append(path)
    return configs


@contextmanager
def redis_queue(backend: str) -> Iterator[str]:
    """A queue name of this run's own on Redis (postgresql) whose keys are deleted at the end."""
    if backend != "postgresql":
        yield ""
        return
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=10)
    client.ping()
    name = f"aokun_load_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        keys = [key for key in client.scan_iter(match=f"huey.*.{name}*")  # tests/servers.py queue_keys
                if key.decode().split(".", 2)[2].split(".")[0] == name]
        if keys:
            client.delete(*keys)
        client.close()


def wait_processed(args, config: Path, url: str) -> float | None:
    if args.backend == "postgresql":
        from chaos_team import drain as pg_drain

        return pg_drain(url, PROCESS_TIMEOUT_S)
    from shared.config import load_config

    return drain(load_config(config).storage.db_path, PROCESS_TIMEOUT_S)


# --- where the CPU goes while the load runs --------------------------------------------------------

def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of one process so far (None: gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _processes() -> dict[int, tuple[str, str]]:
    """pid -> (comm, command line) of every process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                comm = (entry / "comm").read_text().strip()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out[int(entry.name)] = (comm, cmdline)
    return out


def _machine_busy_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, summed over cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / CLOCK_TICKS, sum(values[:8]) / CLOCK_TICKS


class CpuWatch:
    """CPU seconds per group of processes between start() and stop(), as cores used."""

    def __init__(self, services: list[Service], database: str):
        self.services, self.database = services, database

    def _groups(self) -> dict[str, list[int]]:
        groups = collections.defaultdict(list)
        for service in self.services:
            groups[service.name].append(service.proc.pid)
        groups["bench clients (this process)"].append(os.getpid())
        for pid, (comm, cmdline) in _processes().items():
            if comm.startswith("postgres") or cmdline.startswith("postgres:") or "/postgres " in cmdline:
                groups["postgres, every process (shared server)"].append(pid)
                if self.database and f" {self.database} " in f" {cmdline} ":
                    groups[f"postgres backends of {self.database}"].append(pid)
            elif comm.startswith("redis-server"):
                groups["redis-server (shared)"].append(pid)
        return groups

    def _sample(self) -> dict[int, float]:
        return {pid: cpu for pids in self._groups().values() for pid in pids
                if (cpu := _cpu_s(pid)) is not None}

    def start(self) -> None:
        self.started, self.before, self.machine = time.perf_counter(), self._sample(), _machine_busy_s()

    def stop(self) -> list[tuple[str, float]]:
        elapsed = time.perf_counter() - self.started
        machine = _machine_busy_s()
        rows = []
        for name, pids in self._groups().items():
            used = 0.0
            for pid in pids:
                now = _cpu_s(pid)
                if now is not None:
                    used += now - self.before.get(pid, 0.0)  # a process born meanwhile: all of it
            rows.append((name, used / elapsed))
        rows.append((f"whole machine ({os.cpu_count()} cores, every user)", (machine[0] - self.machine[0]) / elapsed))
        return rows


class SessionSampler:
    """Every 0.2 s, the run's PostgreSQL sessions (pg_stat_activity of its database): how many
    run a statement, and how many of those wait for the write lock (an advisory lock)."""

    def __init__(self, url: str, database: str):
        self.url, self.database = url, database
        self.samples: list[tuple[int, int, int]] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            while not self.stop_event.wait(0.2):
                row = conn.execute(
                    "SELECT COUNT(*) FILTER (WHERE state = 'active'),"
                    "       COUNT(*) FILTER (WHERE state = 'active' AND wait_event_type = 'Lock'"
                    "                        AND wait_event = 'advisory'),"
                    "       COUNT(*) FILTER (WHERE state LIKE 'idle in transaction%%')"
                    "  FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                    (self.database,)).fetchone()
                self.samples.append(tuple(row))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> str:
        self.stop_event.set()
        self.thread.join(timeout=10)
        if not self.samples:
            return "no samples"
        n = len(self.samples)
        active = sum(s[0] for s in self.samples) / n
        waiting = sum(s[1] for s in self.samples) / n
        in_tx = sum(s[2] for s in self.samples) / n
        some_wait = sum(1 for s in self.samples if s[1]) / n
        return (f"{n} samples: on average {active:.2f} sessions running a statement, {waiting:.2f} of them "
                f"waiting for the write lock (someone waiting in {100 * some_wait:.0f}% of samples), "
                f"{in_tx:.2f} idle in a transaction")


def bench(args, work: Path) -> None:
    with ExitStack() as stack:
        url = ""
        if args.backend == "postgresql":
            url = stack.enter_context(bench_database(args.pg, args.work and work))
        queue_name = stack.enter_context(redis_queue(args.backend))
        _bench(args, work, url, queue_name)


def _bench(args, work: Path, url: str, queue_name: str) -> None:
    configs = host_configs(work, args, url, queue_name)
    database = url.rsplit("/", 1)[1] if url else ""
    rows, questions = corpus()
    started = time.perf_counter()
    added = seed(configs[0], args.memories, rows)
    print(f"seeded {added} memories in {time.perf_counter() - started:.1f} s "
          f"({len(rows)} source rows, {len(questions)} questions)", flush=True)
    fronts = [Service("front", config, config.parent / f"front-{i}.log", free_port())
              for i, config in enumerate(configs)]
    worker = Service("worker", configs[0], configs[0].parent / "worker.log")
    try:
        worker.start()
        started = time.perf_counter()
        if wait_processed(args, configs[0], url) is None:
            raise RuntimeError(f"the worker did not process the seeded memories in time; see {worker.log_path}")
        print(f"worker processed them in {time.perf_counter() - started:.1f} s", flush=True)
        for front in fronts:  # one after another: the first one to start runs the migrations
            front.start()
            front.wait_listening()
        for front in fronts:
            anyio.run(warm_up, front.url, questions[0][0])
        engines = ("PostgreSQL + Redis queue" if args.backend == "postgresql" else "SQLite + SQLite queue")
        print(f"load: {args.clients} clients, {args.duration:.0f} s, recall share {args.recall_share}, "
              f"{len(fronts)} front(s) over HTTP + one worker, {engines}, default config; load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores", flush=True)
        watch = CpuWatch(fronts + [worker], database)
        sampler = SessionSampler(url, database) if url else None
        watch.start()
        if sampler:
            sampler.start()
        seen, elapsed = load([front.url for front in fronts], args, rows, questions)
        cpu = watch.stop()
        sessions = sampler.stop() if sampler else None
        print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    finally:
        for front in fronts:
            front.stop()
        worker.stop()
    report(seen, elapsed)
    print("\nCPU while the load ran (cores used = CPU seconds / wall seconds):")
    for name, cores in cpu:
        print(f"  {cores:5.2f}  {name}")
    if sessions:
        print(f"PostgreSQL sessions of {database}: {sessions}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=2000, help="memories seeded before the load")
    parser.add_argument("--clients", type=int, default=8, help="concurrent client threads")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--recall-share", type=float, default=0.8, help="share of calls that recall")
    parser.add_argument("--work", type=Path, help="keep (and reuse) the seeded store here")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite",
                        help="postgresql: the store on a database of its own, the queue on Redis")
    parser.add_argument("--pg", default=DEFAULT_SERVER, help="PostgreSQL server for --backend postgresql")
    parser.add_argument("--fronts", type=int, choices=(1, 2), default=1,
                        help="HTTP fronts, each with a data_dir of its own; clients spread across them")
    args = parser.parse_args()
    temp = None if args.work else tempfile.TemporaryDirectory(prefix="aokun-load-")
    work = (args.work or Path(temp.name)).resolve()  # the config names data_dir relative to it
    work.mkdir(parents=True, exist_ok=True)
    try:
        bench(args, work)
    except RuntimeError as exc:  # a process that would not start or finish: its log says why
        print(f"bench_load: {exc} (work folder kept: {work})", file=sys.stderr)
        return 1
    if temp is not None:
        temp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
