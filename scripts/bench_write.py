#!/usr/bin/env python3
"""Benchmark: memorize acknowledgement latency and BM25 recall latency at 1k and 100k memories.

The store is seeded directly (fast), then a real aokun-server is started over stdio and spoken
to by the official MCP client, which times each call end to end. Texts and queries come from
../shared/bench (LoCoMo English, MADial Chinese) when present, otherwise from a generator.

    .venv/bin/python scripts/bench_write.py [--sizes 1000 100000] [--calls 300]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_recall_speed import all_stages_done  # noqa: E402
from shared.config import StorageConfig, TextConfig  # noqa: E402
from shared.store import open_store  # noqa: E402
from shared.store.model.documents import MemoryFields  # noqa: E402

BENCH = ROOT.parent / "shared" / "bench" / "data"


def corpus() -> tuple[list[str], list[str]]:
    """Memory texts and queries, English and Chinese."""
    texts, queries = [], []
    for name in ("locomo_dev", "madial_zh_dev", "madial_en_dev"):
        mem, qry = BENCH / f"{name}.memories.jsonl", BENCH / f"{name}.queries.jsonl"
        if mem.exists():
            texts += [json.loads(line)["content"] for line in mem.open(encoding="utf-8")]
            queries += [json.loads(line)["question"][-300:] for line in qry.open(encoding="utf-8")]
    if not texts:
        words = "tea coffee garden 花生 过敏 杭州 体检 project review cat 跑步 西湖 meeting".split()
        texts = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(3000)]
        queries = [" ".join(words[(i + j) % len(words)] for j in range(3)) for i in range(300)]
    return texts, queries



def _service(store, text_config):
    """The memory service without a queue (this script marks the stages itself)."""
    from shared.assembly import Services
    from shared.config import AppConfig
    from shared.live_config import LiveConfig

    return Services(LiveConfig(AppConfig(text=text_config)), store, queued=False).memories


def seed(data_dir: Path, target: int, texts: list[str]) -> None:
    """Bring the store up to `target` memories, in batches of one transaction each."""
    storage = StorageConfig(data_dir=data_dir, synchronous="normal")
    store = open_store(storage)
    service = _service(store, TextConfig())
    have = store.documents.stats()["total"]
    source = itertools.islice(itertools.cycle(texts), have, target)
    started = time.perf_counter()
    while True:
        batch = [(f"{text} #{have + i}", MemoryFields(persona_id=f"p{(have + i) % 50}"))
                 for i, text in enumerate(itertools.islice(source, 2000))]
        if not batch:
            break
        service.memorize_many(batch)
        have += len(batch)
    store.close()
    all_stages_done(storage)
    print(f"  seeded to {have} memories in {time.perf_counter() - started:.1f} s", flush=True)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


async def measure(config: Path, calls: int, texts: list[str], queries: list[str]) -> dict:
    # The whole environment: the MCP client passes a child only a safe few variables, and a
    # PYTHONPATH naming the code under test must reach the server too.
    server = StdioServerParameters(command=str(Path(sys.executable).parent / "aokun-server"),
                                   args=["--config", str(config)], env=dict(os.environ))
    async with Client(server) as client:
        await client.call_tool("recall", {"query": "warm up"})
        write_ms, read_ms = [], []
        for i in range(calls):
            started = time.perf_counter()
            result = await client.call_tool("memorize", {"content": f"{texts[i % len(texts)]} (bench {i})",
                                                         "metadata": {"persona_id": "bench"}})
            write_ms.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content
        for i in range(calls):
            started = time.perf_counter()
            result = await client.call_tool("recall", {"query": queries[i % len(queries)], "k": 10})
            read_ms.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content
    return {"memorize_p50": percentile(write_ms, 50), "memorize_p99": percentile(write_ms, 99),
            "recall_p50": percentile(read_ms, 50), "recall_p95": percentile(read_ms, 95)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    texts, queries = corpus()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text("storage:\n  data_dir: data\nworker:\n  autostart: false\n")
        rows = []
        for size in sorted(args.sizes):
            print(f"size {size}:", flush=True)
            seed(Path(tmp) / "data", size, texts)
            figures = anyio.run(measure, config, args.calls, texts, queries)
            rows.append((size, figures))
            print("  " + "  ".join(f"{k} {v:.1f} ms" for k, v in figures.items()), flush=True)
    print("\n| stored | memorize p50 | memorize p99 | BM25 recall p50 | BM25 recall p95 |")
    print("|---:|---:|---:|---:|---:|")
    for size, f in rows:
        print(f"| {size:,} | {f['memorize_p50']:.1f} ms | {f['memorize_p99']:.1f} ms | "
              f"{f['recall_p50']:.1f} ms | {f['recall_p95']:.1f} ms |")


if __name__ == "__main__":
    main()
