#!/usr/bin/env python3
"""Load benchmark: concurrent MCP clients over streamable HTTP against one front and one worker.

Seeds N memories (LoCoMo and MADial rows from ../shared/bench/data, read at run time; generated
text without them) through the memory service directly, lets a real aokun-worker process them
(vectors, atoms, graph), then runs C client threads, each with the official MCP client, for
--duration seconds: a share of recall calls with real questions (the last line of a dialogue,
scoped to the question's own group as persona_id) and memorize calls of new texts otherwise.
The worker keeps processing what is memorized meanwhile, as in real use. Default config (recall
cache on, synchronous full). Prints p50 / p95 / p99 per tool, throughput and errors by message.
Everything talks to 127.0.0.1 only and stops by itself.

    .venv/bin/python scripts/bench_load.py [--memories 2000] [--clients 8] [--duration 30]
                                           [--recall-share 0.8] [--work DIR]
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
from datetime import datetime
from pathlib import Path

import anyio
from mcp import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chaos import ClientLoop, Service, drain, error_key, free_port  # noqa: E402

DATA = ROOT.parent / "shared" / "bench" / "data"
SOURCES = ("locomo_dev", "madial_en_dev", "madial_zh_dev")
PROCESS_TIMEOUT_S = 1800.0  # the worker must have processed the seeded memories within this


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
    from shared.config import load_config
    from shared.assembly import Services
    from shared.live_config import LiveConfig
    from shared.store.documents import MemoryFields
    from shared.store.schema import open_store

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


def load(url: str, args, rows: list[dict], questions: list[tuple[str, str]]) -> tuple[Latencies, float]:
    """C clients for args.duration seconds; return what they saw and the seconds it took."""
    seen, stop = Latencies(), threading.Event()
    clients = [ClientLoop([url], 0, stop, Mix(i, rows, questions, args.recall_share, i).next_call,
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


def bench(args, work: Path) -> None:
    config = work / "config.yaml"
    if not config.exists():
        config.write_text("storage:\n  data_dir: data\nworker:\n  autostart: false\n")
    rows, questions = corpus()
    started = time.perf_counter()
    added = seed(config, args.memories, rows)
    print(f"seeded {added} memories in {time.perf_counter() - started:.1f} s "
          f"({len(rows)} source rows, {len(questions)} questions)", flush=True)
    front = Service("front", config, work / "front.log", free_port())
    worker = Service("worker", config, work / "worker.log")
    try:
        worker.start()
        started = time.perf_counter()
        if drain(work / "data" / "aokun.db", PROCESS_TIMEOUT_S) is None:
            raise RuntimeError(f"the worker did not process the seeded memories in time; see {worker.log_path}")
        print(f"worker processed them in {time.perf_counter() - started:.1f} s", flush=True)
        front.start()
        front.wait_listening()
        anyio.run(warm_up, front.url, questions[0][0])
        print(f"load: {args.clients} clients, {args.duration:.0f} s, recall share {args.recall_share}, "
              f"one front over HTTP + one worker, default config; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
        seen, elapsed = load(front.url, args, rows, questions)
    finally:
        front.stop()
        worker.stop()
    report(seen, elapsed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=2000, help="memories seeded before the load")
    parser.add_argument("--clients", type=int, default=8, help="concurrent client threads")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--recall-share", type=float, default=0.8, help="share of calls that recall")
    parser.add_argument("--work", type=Path, help="keep (and reuse) the seeded store here")
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
