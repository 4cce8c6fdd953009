#!/usr/bin/env python3
"""Recall latency at scale, all channels, cache off, query embedding included.

Seeds N memories (LoCoMo turns, or generated text) with their graph output (a fact entry per
memory plus person and topic nodes and their edges) and vectors for documents and graph
entries (random unit vectors in the default model's space: embedding 100k texts here would take
hours; search cost does not depend on the values). Then times recall of real questions
(LoCoMo / MADial, last turn for dialogues) through the store API (the Recaller in-process)
and through the official MCP client over stdio.

    .venv/bin/python scripts/bench_recall_speed.py [--size 100000] [--queries 200] [--work DIR]
    .venv/bin/python scripts/bench_recall_speed.py --backend both   # SQLite and PostgreSQL, one run
    .venv/bin/python scripts/bench_recall_speed.py --unscoped       # recall without persona_id

--backend postgresql (or both) seeds a database of its own on --pg's server (dropped at the end
unless --work keeps it) and prints each engine's figures and PostgreSQL's as a ratio of
SQLite's. Memorize acknowledgements are timed too (the memory service's write, in-process).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
sys.path.insert(0, str(ROOT / "scripts"))

from bench_servers import DEFAULT_SERVER, bench_database, run_sql  # noqa: E402
from shared.config import load_config  # noqa: E402
from shared.store import open_store  # noqa: E402
from shared.store.model.documents import DocumentFilter, MemoryFields  # noqa: E402
from shared.store.model.graph import EdgeSpec, EntrySpec, MemoryGraph, NodeSpec  # noqa: E402
from shared.store.model.vectors import VectorRow  # noqa: E402
from shared.text.segment import Segmenter  # noqa: E402

DATA = ROOT.parent / "shared" / "bench" / "data"
BIN = Path(sys.executable).parent
MODEL, DIM = "local:multilingual-e5-small-q4", 384
PERSONAS = 50


def corpus() -> tuple[list[dict], list[str]]:
    rows, questions = [], []
    for name in ("locomo_dev", "madial_en_dev", "madial_zh_dev"):
        if (DATA / f"{name}.memories.jsonl").exists():
            rows += [json.loads(x) for x in (DATA / f"{name}.memories.jsonl").open(encoding="utf-8")]
            questions += [json.loads(x)["question"].strip().split("\n")[-1]
                          for x in (DATA / f"{name}.queries.jsonl").open(encoding="utf-8")]
    if not rows:
        rows = [{"content": f"note {i} about tea, the garden and Alice", "participants": ["Alice"]}
                for i in range(2000)]
        questions = ["what about the garden?", "who drinks tea?"]
    return rows, questions



def _service(store, text_config):
    """The memory service without a queue (this script marks the stages itself)."""
    from shared.assembly import Services
    from shared.config import AppConfig
    from shared.live_config import LiveConfig

    return Services(LiveConfig(AppConfig(text=text_config)), store, queued=False).memories


def seed_sql(storage, statements: list[tuple[str, tuple]]) -> None:
    """Seeding shortcuts the store's interface has no call for (states no worker would reach
    here), run on the database itself in one transaction, as the tests' db_rows reads it.
    Call it outside any write of the store (it waits for the write lock)."""
    if storage.backend == "postgresql":
        run_sql(storage.url, [(sql.replace("?", "%s"), params) for sql, params in statements])
        return
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(storage.db_path, timeout=30)) as conn, conn:
        for sql, params in statements:
            conn.execute(sql, params)


def all_stages_done(storage) -> None:
    """Seeded memories count as processed (no worker runs here)."""
    seed_sql(storage, [("UPDATE memory_stages SET status = 'done'", ())])


def seed(config_path: Path, size: int, rows: list[dict]) -> None:
    config = load_config(config_path)
    store = open_store(config.storage)
    segmenter = Segmenter(config.text)
    service = _service(store, config.text)
    have = store.documents.stats()["total"]
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    while have < size:
        n = min(2000, size - have)
        batch = [rows[(have + i) % len(rows)] for i in range(n)]
        ids = service.memorize_many([(f"{r['content']} #{have + i}", MemoryFields(
            persona_id=f"p{(have + i) % PERSONAS}", participants=tuple(r.get("participants") or ())))
            for i, r in enumerate(batch)])
        doc_vectors = _unit(rng, n)
        entry_vectors = _unit(rng, n)
        with store.write() as tx:
            for j, (doc_id, row) in enumerate(zip(ids, batch)):
                tx.vectors.delete_for_memory(doc_id, 0.0, kind="graph_entry")
                entry_ids = tx.graph.replace_for_memory(doc_id, f"p{(have + j) % PERSONAS}",
                                                        _graph_of(row, segmenter), "seed", 0.0)
                tx.vectors.upsert(VectorRow("document", doc_id, doc_id, MODEL, doc_vectors[j], "seed"), 0.0)
                tx.vectors.upsert(VectorRow("graph_entry", entry_ids[0], doc_id, MODEL, entry_vectors[j], "seed"), 0.0)
        all_stages_done(config.storage)
        have += n
        print(f"\r  seeded {have}/{size} ({time.perf_counter() - started:.0f} s)", end="", flush=True)
    print()
    # What the worker's hourly housekeeping (and `aokun import`) does: the planner's statistics
    # for the seeded size. PostgreSQL here runs without autovacuum; without them recall is
    # several times slower (docs/performance.md).
    store.refresh_statistics()
    store.close()


def _unit(rng, n: int) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _graph_of(row: dict, segmenter: Segmenter) -> MemoryGraph:
    text = row["content"].split("] ", 1)[-1]
    fact = NodeSpec("fact", text[:80], text[:80].lower())
    people = [NodeSpec("person", p, p.lower()) for p in row.get("participants") or ()]
    topic_words = segmenter.terms(text)[:2]
    topics = [NodeSpec("topic", w, w) for w in topic_words]
    edges = [EdgeSpec(n, fact, "describes", 0.8) for n in people + topics]
    edges += [EdgeSpec(a, b, "co_occurs_with", 0.6) for a in people for b in topics]
    entry = f"Fact: {text}"
    return MemoryGraph(nodes=[fact, *people, *topics], edges=edges,
                       entries=[EntrySpec(entry, " ".join(segmenter.terms(entry)), fact, 0.8)])


def scope_of(i: int, unscoped: bool) -> str | None:
    """The persona a timed recall is scoped to (None: all of them, as an admin's recall
    without persona_id)."""
    return None if unscoped else f"p{i % PERSONAS}"


def store_api_latency(config_path: Path, questions: list[str], unscoped: bool = False) -> list[float]:
    from aokun_server.app import build_front

    front = build_front(load_config(config_path))
    front.services.vector_indexes.document.sync()
    from shared.search.recall import RecallRequest

    front.recaller.recall(RecallRequest("warm up", 10, DocumentFilter()))
    times = []
    for i, q in enumerate(questions):
        started = time.perf_counter()
        front.recaller.recall(RecallRequest(q, 10, DocumentFilter(persona_id=scope_of(i, unscoped))))
        times.append(1000 * (time.perf_counter() - started))
    return times


async def mcp_latency(config_path: Path, questions: list[str], unscoped: bool = False) -> list[float]:
    # The whole environment: the MCP client passes a child only a safe few variables, and a
    # PYTHONPATH naming the code under test must reach the server too.
    params = StdioServerParameters(command=str(BIN / "aokun-server"), args=["--config", str(config_path)],
                                   env=dict(os.environ))
    async with Client(params) as client:
        await client.call_tool("recall", {"query": "warm up"})
        times = []
        for i, q in enumerate(questions):
            started = time.perf_counter()
            scope = scope_of(i, unscoped)
            result = await client.call_tool("recall", {"query": q, "k": 10} | ({"persona_id": scope} if scope else {}))
            times.append(1000 * (time.perf_counter() - started))
            assert not result.is_error, result.content
        acks = []
        for i in range(300):
            started = time.perf_counter()
            result = await client.call_tool("memorize", {"content": f"an acknowledged note {i} of the bench",
                                                         "metadata": {"persona_id": f"p{i % PERSONAS}"}})
            acks.append(1000 * (time.perf_counter() - started))
            assert not result.is_error, result.content
    return times, acks


def summary(name: str, times: list[float]) -> str:
    q = statistics.quantiles(times, n=100, method="inclusive")
    return f"{name}: p50 {q[49]:.1f} ms, p95 {q[94]:.1f} ms, p99 {q[98]:.1f} ms"


def memorize_latency(config_path: Path, count: int) -> list[float]:
    """Acknowledgement time of single memorizes through the memory service (what a front
    does before it replies: one write transaction with the stage rows)."""
    config = load_config(config_path)
    store = open_store(config.storage)
    service = _service(store, config.text)
    times = []
    try:
        for i in range(count):
            started = time.perf_counter()
            service.memorize(f"a timed note {i}: the bench wrote this at step {i}",
                             MemoryFields(persona_id=f"p{i % PERSONAS}"))
            times.append(1000 * (time.perf_counter() - started))
    finally:
        store.close()
    return times


def write_bench_config(work: Path, storage: str) -> Path:
    config = work / "config.yaml"
    config.write_text(f"storage:\n  data_dir: data\n  synchronous: normal\n{storage}"
                      "worker:\n  autostart: false\n"
                      "retrieval:\n  cache_enabled: false\n  access_reinforcement: false\n"
                      "server:\n  exposed_tools: [recall, memorize]\n")
    return config


def measure(config: Path, size: int, rows: list[dict], questions: list[str],
            unscoped: bool) -> dict[str, list[float]]:
    seed(config, size, rows)
    figures = {"store API (Recaller in-process)": store_api_latency(config, questions, unscoped)}
    recalls, acks = anyio.run(mcp_latency, config, questions, unscoped)
    figures["MCP client over stdio"] = recalls
    figures["memorize ack (memory service)"] = memorize_latency(config, 500)
    figures["memorize ack (MCP client over stdio)"] = acks
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--work", type=Path, help="keep (and reuse) the seeded store here")
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="sqlite")
    parser.add_argument("--pg", default=DEFAULT_SERVER, help="PostgreSQL server for --backend postgresql")
    parser.add_argument("--unscoped", action="store_true",
                        help=f"recall across all {PERSONAS} personas (no persona_id), not one persona's memories")
    args = parser.parse_args()
    temp = None if args.work else tempfile.TemporaryDirectory()
    work = args.work or Path(temp.name)
    rows, questions = corpus()
    questions = questions[:args.queries]
    engines = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    print(f"{args.size:,} memories, {len(questions)} queries, all channels, cache off, "
          + ("no persona (all of them)" if args.unscoped else f"each query in one of {PERSONAS} personas"))
    results = {}
    for engine in engines:
        folder = work / engine
        folder.mkdir(parents=True, exist_ok=True)
        if engine == "sqlite":
            results[engine] = measure(write_bench_config(folder, ""), args.size, rows, questions, args.unscoped)
        else:
            with bench_database(args.pg, folder if args.work else None) as url:
                storage = f"  backend: postgresql\n  url: {url}\n"
                results[engine] = measure(write_bench_config(folder, storage), args.size, rows, questions,
                                          args.unscoped)
        for name, times in results[engine].items():
            print(f"{engine:10} {summary(name, times)}", flush=True)
    if len(engines) == 2:
        for name in results["sqlite"]:
            ratio = [_quantile(results["postgresql"][name], q) / _quantile(results["sqlite"][name], q)
                     for q in (49, 94)]
            print(f"postgresql / sqlite, {name}: p50 {ratio[0]:.2f}x, p95 {ratio[1]:.2f}x")
    if temp is not None:
        temp.cleanup()


def _quantile(times: list[float], index: int) -> float:
    return statistics.quantiles(times, n=100, method="inclusive")[index]


if __name__ == "__main__":
    main()
