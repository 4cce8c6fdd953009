"""The pipeline's speed against the raw embedder on the same texts (scripts/bench_pipeline.py).

Two samples: short turns (LoCoMo's dialog turns) and long documents (LoCoMo's whole sessions,
2-4.5 KB each), read from ../shared/bench at run time. For each:
- raw: the default embedder alone in this process over what the worker embeds for those texts
  (a short text as it is; a long one as its passages: what the model reads whole), batch by
  batch as the worker batches them;
- searchable by meaning: memorize through the official MCP client (stdio) with a real
  aokun-worker, until every memory's own vectors are written (its embed stage done);
- whole pipeline: until every stage is done (atoms, graph entries and their vectors too).
Memories/s and characters/s, and each as a share of raw.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.config import load_config  # noqa: E402
from shared.store import open_store  # noqa: E402
from shared.store.model.stages import EMBED  # noqa: E402
from shared.text.passages import passages  # noqa: E402

BIN = Path(sys.executable).parent
DATA = ROOT.parent / "shared" / "bench" / "data"
BATCH = 16  # queue.embed_batch_size's default: memories per embedding batch


def samples(short: int, long: int) -> dict[str, list[str]]:
    """{"short turns": ..., "long documents": ...}, each text made unique by a number."""
    turns = [json.loads(line)["content"] for line in (DATA / "locomo_dev.memories.jsonl").open(encoding="utf-8")]
    sessions = [json.loads(line)["content"]
                for line in (DATA / "locomo_session_dev.memories.jsonl").open(encoding="utf-8")]
    return {"short turns": [f"{turns[i % len(turns)]} ({i})" for i in range(short)],
            "long documents": [f"{sessions[i % len(sessions)]} ({i})" for i in range(long)]}


@dataclass(frozen=True)
class Speed:
    memories: float  # per second
    chars: float

    def share_of(self, raw: Speed) -> str:
        return f"{self.memories / raw.memories:.2f} of raw"

    def __str__(self) -> str:
        return f"{self.memories:6.1f} memories/s {self.chars:8.0f} chars/s"


def raw_speed(sample: list[str]) -> Speed:
    """The default embedder alone, over each batch of memories' passages."""
    from shared.embedders.local import E5Embedder

    embedder = E5Embedder(threads=0)
    embedder.embed_passages(sample[:2])  # load the model outside the timing
    started = time.perf_counter()
    for i in range(0, len(sample), BATCH):
        embedder.embed_passages([p.text for text in sample[i:i + BATCH] for p in passages(text)])
    elapsed = time.perf_counter() - started
    return Speed(len(sample) / elapsed, sum(map(len, sample)) / elapsed)


async def _memorize_all(config: Path, sample: list[str]) -> None:
    params = StdioServerParameters(command=str(BIN / "aokun-server"), args=["--config", str(config)],
                                   env=dict(os.environ))
    async with Client(params) as client:
        for text in sample:
            result = await client.call_tool("memorize", {"content": text})
            assert not result.is_error, result.content


def pipeline_speed(folder: Path, sample: list[str]) -> tuple[Speed, Speed, float]:
    """(to searchable by meaning, through every stage, seconds the memorize calls took)."""
    config = folder / "config.yaml"
    config.write_text("storage:\n  data_dir: data\nworker:\n  autostart: false\n"
                      "server:\n  max_content_chars: 100000\n")
    worker = subprocess.Popen([str(BIN / "aokun-worker"), "--config", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    store = open_store(load_config(config).storage)
    try:
        while not store.runtime.worker_rows():
            time.sleep(0.05)
        started = time.perf_counter()
        anyio.run(_memorize_all, config, sample)
        acked = time.perf_counter() - started
        searchable = None
        while True:
            waiting = store.stages.waiting_by_stage()
            now = time.perf_counter() - started
            if searchable is None and not waiting[EMBED]:
                searchable = now
            if not any(waiting.values()):
                break
            time.sleep(0.05)
        chars = sum(map(len, sample))
        return (Speed(len(sample) / searchable, chars / searchable), Speed(len(sample) / now, chars / now), acked)
    finally:
        store.close()
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=120)


def report(folder: Path, short: int, long: int) -> None:
    for name, sample in samples(short, long).items():
        if not sample:
            continue
        raw = raw_speed(sample)
        sub = folder / name.replace(" ", "-")
        sub.mkdir()
        searchable, whole, acked = pipeline_speed(sub, sample)
        print(f"{name} ({len(sample)}, {sum(map(len, sample)) / len(sample):.0f} chars each):", flush=True)
        print(f"  raw embedder         {raw}", flush=True)
        print(f"  searchable by meaning {searchable}  {searchable.share_of(raw)}", flush=True)
        print(f"  every stage done     {whole}  {whole.share_of(raw)}"
              f"  (the memorize calls took {acked:.1f} s)", flush=True)
