#!/usr/bin/env python3
"""Benchmark: `aokun hook` latency, the wall clock of the whole process as a host sees it.

Seeds a store of --memories LoCoMo turns (no persona: the default identity, as the README
wires the hooks) through the memory service, lets a real worker embed them and build their
atoms and graph (skip with --no-worker), then runs `aokun hook` as the README wires it --runs
times per case, each with a different LoCoMo question as the prompt:

- prompt, no front: recall in the hook's own process (BM25 + graph keywords; jieba loads);
- prompt, with a running HTTP front (found by its note in data_dir; no store opened);
- session-start (the profile: SQL reads only).

It ends with the two prompt figures that have goals (p50 with a front, without one)
and the machine's load average while it ran.

    .venv/bin/python scripts/bench_hook.py [--memories 300] [--runs 7] [--no-worker]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.config import load_config  # noqa: E402
from shared.store import open_store  # noqa: E402
from shared.store.model.documents import MemoryFields  # noqa: E402

DATA = ROOT.parent / "shared" / "bench" / "data"
BIN = Path(sys.executable).parent


def corpus(n: int) -> tuple[list[str], list[str]]:
    mem, qry = DATA / "locomo_dev.memories.jsonl", DATA / "locomo_dev.queries.jsonl"
    if mem.exists():
        texts = [json.loads(line)["content"] for line in mem.open(encoding="utf-8")][:n]
        questions = [json.loads(line)["question"].strip().split("\n")[-1][-300:]
                     for line in qry.open(encoding="utf-8")]
    else:
        words = "tea coffee garden hiking project review cat running lake meeting sister Lisbon".split()
        texts = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(n)]
        questions = [" ".join(words[(i + j) % len(words)] for j in range(3)) for i in range(50)]
    return texts, questions


def write_config(folder: Path, port: int) -> Path:
    lines = ["storage:", f"  data_dir: {folder / 'data'}", "worker:", "  autostart: false",
             "server:", f"  port: {port}"]
    path = folder / "config.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def seed(config: Path, texts: list[str]) -> None:
    from shared.assembly import Services
    from shared.live_config import LiveConfig

    cfg = load_config(config)
    store = open_store(cfg.storage)
    service = Services(LiveConfig(cfg), store, queued=False).memories
    for i, text in enumerate(texts):
        service.memorize(text, MemoryFields(pinned=i < 3, session_id=f"s{i // 20}"))
    store.close()


def process(config: Path, n: int, timeout: float = 900.0) -> float:
    """A worker until every stage is done; its wall time."""
    started = time.perf_counter()
    worker = subprocess.Popen([str(BIN / "aokun-worker"), "--config", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = Path(load_config(config).storage.db_path)
    try:
        while time.perf_counter() - started < timeout:
            conn = sqlite3.connect(db, timeout=30)
            done = conn.execute("SELECT COUNT(*) FROM memory_stages WHERE status = 'done'").fetchone()[0]
            conn.close()
            if done >= 3 * n:
                break
            time.sleep(1)
    finally:
        worker.terminate()
        worker.wait(30)
    return time.perf_counter() - started


def timed(command: list[str], stdin: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or (done.stderr and "aokun hook: prompt:" not in done.stderr
                                and "session-start:" not in done.stderr):
        print(f"  ! {done.stderr.strip()[:200]}")
    return elapsed, done.stderr


def case(name: str, command: list[str], prompts: list[str], event: str) -> float:
    times, sources = [], set()
    for prompt in prompts:
        stdin = json.dumps({"session_id": "bench", "hook_event_name": event, "prompt": prompt,
                            "source": "startup"})
        elapsed, err = timed(command, stdin)
        times.append(elapsed * 1000)
        sources.update(line.split(" from ", 1)[1].rsplit(" in ", 1)[0]
                       for line in err.splitlines() if " chars from " in line)
    print(f"{name:<48} min {min(times):6.0f} ms  median {statistics.median(times):6.0f} ms  "
          f"max {max(times):6.0f} ms   ({'; '.join(sorted(sources))})")
    return statistics.median(times)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-worker", action="store_true", help="no vectors, atoms or graph")
    args = parser.parse_args()
    texts, questions = corpus(args.memories)
    prompts = questions[: args.runs]
    with tempfile.TemporaryDirectory(prefix="bench-hook-") as tmp:
        folder = Path(tmp)
        port = free_port()
        config = write_config(folder, port)
        seed(config, texts)
        print(f"store: {len(texts)} memories (3 pinned), no persona")
        if not args.no_worker:
            print(f"worker: every stage done in {process(config, len(texts)):.0f} s")
        aokun = [str(BIN / "aokun"), "hook"]
        prompt = aokun + ["prompt", "--config", str(config), "--verbose"]
        start = aokun + ["session-start", "--config", str(config), "--verbose"]
        print(f"{args.runs} runs each, wall clock of the whole hook process:")
        without = case("prompt, no front", prompt, prompts, "UserPromptSubmit")
        case("session-start", start, prompts, "SessionStart")
        front = subprocess.Popen([str(BIN / "aokun-server"), "--config", str(config), "--transport", "http"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 env={**os.environ})
        try:
            wait_for_front(config, port)
            timed(prompt, json.dumps({"prompt": "warm up"}))
            with_front = case("prompt, running front", prompt, prompts, "UserPromptSubmit")
        finally:
            front.terminate()
            front.wait(30)
        imports = [sys.executable, "-c", "import aokun_admin.main"]
        case("(floor) python -c 'import aokun_admin.main'", imports, prompts[:3], "UserPromptSubmit")
        case("(floor) python -c pass", [sys.executable, "-c", "pass"], prompts[:3], "UserPromptSubmit")
    print(f"p50 prompt with a running front: {with_front:.0f} ms (goal 150); without one: "
          f"{without:.0f} ms (goal 1000); load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def wait_for_front(config: Path, port: int, timeout: float = 60.0) -> None:
    db = Path(load_config(config).storage.db_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            conn = sqlite3.connect(db, timeout=30)
            beating = conn.execute("SELECT COUNT(*) FROM fronts WHERE transport = 'http'").fetchone()[0]
            conn.close()
            if beating and any(db.parent.glob("front-*.endpoint")):
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("the front did not start")


if __name__ == "__main__":
    sys.exit(main())
