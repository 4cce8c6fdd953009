#!/usr/bin/env python3
"""Benchmark the worker pipeline and the front's cold start.

1. Speed (scripts/pipeline_speed.py): short turns and long documents memorized through the
   official MCP client (stdio) with a real aokun-worker, timed until every memory is
   searchable by meaning (its own vectors written) and until every stage is done, each
   against the default embedder's raw speed on the same texts.
2. Cold start: with 10k and 100k memories that have vectors (random unit vectors in the
   default model's space: embedding 100k texts would take over an hour here), the time from
   starting aokun-server to its first hybrid recall answer (median of --repeat starts), and
   the front's RSS after it (and its peak): without a FAISS snapshot (the index built from
   SQLite), with a current snapshot (written as the worker writes it), and with a snapshot 1%
   of the vectors behind (the most a worker lets it lag).

    .venv/bin/python scripts/bench_pipeline.py [--memories 300] [--long 64] [--sizes 10000 100000]
        [--repeat 3] [--cache DIR]

--memories 0 --long 0 skips the speed part; --sizes with no size skips the cold starts.
--cache keeps the seeded stores in DIR (seeding 100k memories takes about a minute) and reuses
them on the next run.
"""

from __future__ import annotations

import argparse
import os
import shutil
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

import pipeline_speed  # noqa: E402  (scripts/pipeline_speed.py)
from bench_recall_speed import all_stages_done  # noqa: E402
from shared.config import load_config  # noqa: E402
from shared.search import snapshot  # noqa: E402
from shared.search.vectors import VectorIndex  # noqa: E402
from shared.store import open_store  # noqa: E402
from shared.store.model.documents import DocumentFilter, MemoryFields  # noqa: E402
from shared.store.model.vectors import KINDS, VectorRow  # noqa: E402

BIN = Path(sys.executable).parent
MODEL, DIM = "local:multilingual-e5-small-q4", 384


def _service(store, text_config):
    """The memory service without a queue (this script marks the stages itself)."""
    from shared.assembly import Services
    from shared.config import AppConfig
    from shared.live_config import LiveConfig

    return Services(LiveConfig(AppConfig(text=text_config)), store, queued=False).memories


def seed_with_vectors(folder: Path, size: int) -> Path:
    config = folder / "config.yaml"
    config.write_text("storage:\n  data_dir: data\n  synchronous: normal\nworker:\n  autostart: false\n")
    app = load_config(config)
    store = open_store(app.storage)
    service = _service(store, app.text)
    rng = np.random.default_rng(0)
    sample = pipeline_speed.samples(2000, 0)["short turns"]
    have = 0
    while have < size:
        n = min(2000, size - have)
        ids = service.memorize_many([(sample[i], MemoryFields(persona_id=f"p{i % 20}")) for i in range(n)])
        matrix = rng.standard_normal((n, DIM)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        with store.write() as tx:
            for doc_id, vec in zip(ids, matrix):
                tx.vectors.upsert(VectorRow("document", doc_id, doc_id, MODEL, vec, "seed"), 0.0)
        all_stages_done(app.storage)
        have += n
    store.close()
    return config


def seeded_store(cache: Path | None, size: int) -> tuple[Path, tempfile.TemporaryDirectory | None]:
    """(config of a store of `size` memories with vectors, the temporary folder to clean up)."""
    if cache is None:
        folder = tempfile.TemporaryDirectory()
        return seed_with_vectors(Path(folder.name), size), folder
    folder = cache / f"store-{size}"
    if not (folder / "seeded").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        started = time.perf_counter()
        seed_with_vectors(folder, size)
        (folder / "seeded").write_text(f"{time.perf_counter() - started:.0f} s\n")
    return folder / "config.yaml", None


def write_snapshots(config: Path) -> float:
    """Write the snapshots as a worker does (VectorIndex.save_snapshot); return the seconds."""
    store = open_store(load_config(config).storage)
    started = time.perf_counter()
    for kind in KINDS:
        VectorIndex(store, kind, MODEL, DIM).save_snapshot()
    store.close()
    return time.perf_counter() - started


def remove_snapshots(config: Path) -> None:
    for kind in KINDS:
        snapshot.path_for(load_config(config).storage.data_dir, kind).unlink(missing_ok=True)


def replace_vectors(config: Path, share: float) -> int:
    """Re-embed `share` of the memories (new random vectors): changes after the snapshot."""
    store = open_store(load_config(config).storage)
    ids = sorted(store.documents.ids_in_scope(DocumentFilter(include_archived=True)))
    ids = sorted(store.vectors.owners_with_vectors("document", MODEL, ids))
    rng = np.random.default_rng(len(ids))
    chosen = rng.choice(ids, size=int(len(ids) * share), replace=False)
    with store.write() as tx:
        for doc_id in chosen:
            vec = rng.standard_normal(DIM).astype(np.float32)
            tx.vectors.upsert(VectorRow("document", int(doc_id), int(doc_id), MODEL,
                                        vec / np.linalg.norm(vec), "bench"), time.time())
    store.close()
    return len(chosen)


async def first_recall(config: Path) -> tuple[float, float, float]:
    """(seconds from spawn to the first recall answer, front RSS and peak RSS in MB then)."""
    started = time.perf_counter()
    params = StdioServerParameters(command=str(BIN / "aokun-server"), args=["--config", str(config)])
    async with Client(params) as client:
        # recall syncs the FAISS index and loads the query model itself if the background
        # warm-up has not finished, so its first answer marks the end of the cold start.
        result = await client.call_tool("recall", {"query": "what did Caroline do at the support group?"})
        elapsed = time.perf_counter() - started
        assert not result.is_error
        rss, peak = _front_memory_mb(config)
    return elapsed, rss, peak


def cold_starts(config: Path, repeat: int) -> str:
    runs = [anyio.run(first_recall, config) for _ in range(repeat)]
    seconds, rss, peak = (statistics.median(r[i] for r in runs) for i in range(3))
    return (f"{seconds:.2f} s (runs: {', '.join(f'{r[0]:.2f}' for r in runs)}), "
            f"RSS {rss:.0f} MB, peak {peak:.0f} MB")


def _front_memory_mb(config: Path) -> tuple[float, float]:
    """(VmRSS, VmHWM) of the front started with this config, in MB."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
                if b"aokun-server" in cmdline and str(config).encode() in cmdline:
                    status = dict(line.split(":", 1) for line in open(f"/proc/{entry}/status"))
                    return (int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024)
            except OSError:
                continue
    return float("nan"), float("nan")


def cold_start_figures(config: Path, size: int, repeat: int) -> None:
    remove_snapshots(config)
    print(f"{size:,} memories with vectors, cold start to first hybrid recall:", flush=True)
    print(f"  without a snapshot (index from SQLite): {cold_starts(config, repeat)}", flush=True)
    written = write_snapshots(config)
    print(f"  snapshot written in {written:.2f} s "
          f"({snapshot.path_for(load_config(config).storage.data_dir, 'document').stat().st_size / 1e6:.0f} MB)",
          flush=True)
    print(f"  with the snapshot: {cold_starts(config, repeat)}", flush=True)
    changed = replace_vectors(config, 0.01)
    print(f"  with the snapshot {changed:,} changes behind: {cold_starts(config, repeat)}", flush=True)
    written = write_snapshots(config)
    print(f"  snapshot brought up to date in {written:.2f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=300, help="short turns for the speed part")
    parser.add_argument("--long", type=int, default=64, help="long documents for the speed part")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache", type=Path)
    args = parser.parse_args()
    if args.memories or args.long:
        with tempfile.TemporaryDirectory() as tmp:
            pipeline_speed.report(Path(tmp), args.memories, args.long)
    for size in args.sizes:
        config, temporary = seeded_store(args.cache, size)
        try:
            cold_start_figures(config, size, args.repeat)
        finally:
            if temporary is not None:
                temporary.cleanup()


if __name__ == "__main__":
    main()
