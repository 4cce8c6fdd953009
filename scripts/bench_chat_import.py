"""`aokun import` of a generated ChatGPT conversations.json: time until every conversation is
stored, peak memory of the import process, and the time of importing it again (all present).

With a real aokun-worker (started and registered before the import begins; --no-worker skips
it), also, each from the import's start: the time until every imported memory is searchable by
meaning (none waits for its embed stage), the time until every stage is done, and the worker's
peak memory (VmHWM). The import's own estimate of the time to searchable is printed as it said it.

    .venv/bin/python scripts/bench_chat_import.py [--conversations 1000] [--kind chatgpt|claude]
                                                  [--no-worker]

Each conversation is twelve messages, English and Chinese in turn: the user's short statements
and questions, the assistant's answers of about 1,500 characters (a real export's answers are
most of its bytes), in ChatGPT's message tree or Claude's message list. Prints numbers; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.config import load_config  # noqa: E402
from shared.store import open_store  # noqa: E402
from shared.store.interface import Store  # noqa: E402
from shared.store.model.stages import EMBED  # noqa: E402

BIN = Path(sys.executable).parent
POLL_S = 0.05

USER_EN = ["I moved to Lyon last spring with my sister Anna.", "How do I keep basil alive indoors?",
           "I prefer running in the morning before work.", "What is a good stretch after a long run?",
           "My daughter starts school next September.", "Can you explain how compound interest works?"]
USER_ZH = ["我最近开始学游泳了，每周去两次。", "怎么做红烧肉比较好吃？", "我下个月要去杭州出差三天。",
           "有什么适合初学者的吉他曲子？", "我女儿喜欢画画，想给她报个班。", "如何提高睡眠质量？"]
ANSWER_EN = ("Here is a short overview. First, consider the basics and why they matter; then the "
             "common mistakes people make and how to avoid them. ") * 12
ANSWER_ZH = "这里有几点建议。首先要了解基本原理，然后注意常见的误区，并且循序渐进地练习。" * 20


def turns(index: int) -> list[tuple[str, str]]:
    said = USER_ZH if index % 2 else USER_EN
    answer = ANSWER_ZH if index % 2 else ANSWER_EN
    return [pair for i in range(6) for pair in (("user", f"{said[(index + i) % 6]} ({index}-{i})"),
                                                ("assistant", answer))]


def chatgpt(index: int) -> dict:
    begun = 1_700_000_000 + index * 3600.0
    mapping: dict[str, dict] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    last = "root"
    for number, (role, text) in enumerate(turns(index)):
        key = f"{index}-{number}"
        mapping[key] = {"id": key, "parent": last, "children": [], "message": {
            "id": key, "author": {"role": role, "name": None, "metadata": {}}, "create_time": begun + number * 60,
            "content": {"content_type": "text", "parts": [text]}, "status": "finished_successfully",
            "metadata": {}, "recipient": "all"}}
        mapping[last]["children"].append(key)
        last = key
    ident = f"bench-{index:08d}"
    return {"title": f"Bench conversation {index}", "create_time": begun, "update_time": begun + 720,
            "mapping": mapping, "current_node": last, "conversation_id": ident, "id": ident}


def claude(index: int) -> dict:
    begun = 1_700_000_000 + index * 3600

    def iso(seconds: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(seconds))

    messages = [{"uuid": f"{index}-{n}", "sender": "human" if role == "user" else "assistant", "text": text,
                 "content": [{"type": "text", "text": text}], "created_at": iso(begun + n * 60)}
                for n, (role, text) in enumerate(turns(index))]
    return {"uuid": f"bench-{index:08d}", "name": f"Bench conversation {index}", "created_at": iso(begun),
            "updated_at": iso(begun + 720), "chat_messages": messages}


def run(args: list[str]) -> tuple[float, list[str]]:
    """(seconds the command took, its output's lines)."""
    started = time.perf_counter()
    result = subprocess.run([str(BIN / "aokun"), *args], capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"aokun {' '.join(args)} exited {result.returncode}: {result.stderr[-1000:]}")
    return elapsed, result.stdout.strip().splitlines()


def write_export(export: Path, kind: str, conversations: int) -> None:
    make = chatgpt if kind == "chatgpt" else claude
    with export.open("w", encoding="utf-8") as out:  # as the service writes it: one line
        out.write("[")
        for index in range(conversations):
            out.write(("," if index else "") + json.dumps(make(index), ensure_ascii=False))
        out.write("]")


def check_alive(worker: subprocess.Popen, log: Path) -> None:
    if worker.poll() is not None:
        raise SystemExit(f"aokun-worker exited {worker.returncode}: {log.read_text()[-1000:]}")


def start_worker(config: Path, store: Store, log: Path) -> subprocess.Popen:
    """A real worker, returned once it has registered in the store."""
    with log.open("w") as out:
        # Passive OpenMP threads: the import and the worker share the cores.
        worker = subprocess.Popen([str(BIN / "aokun-worker"), "--config", str(config)],
                                  stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    while not store.runtime.worker_rows():
        check_alive(worker, log)
        time.sleep(POLL_S)
    return worker


def until_done(store: Store, started: float, worker: subprocess.Popen, log: Path) -> tuple[float, float]:
    """Seconds from `started` until none waits for its embed stage, and until none waits at all."""
    searchable: float | None = None
    while True:
        waiting = store.stages.waiting_by_stage()
        now = time.perf_counter() - started
        if searchable is None and not waiting[EMBED]:
            searchable = now
        if searchable is not None and not any(waiting.values()):
            return searchable, now
        check_alive(worker, log)
        time.sleep(POLL_S)


def stop_worker(worker: subprocess.Popen) -> float:
    """Stops the worker; returns its peak resident memory in MB, read just before."""
    status = Path(f"/proc/{worker.pid}/status").read_text()
    peak_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=120)
    return peak_kb / 1024


def import_once(kind: str, conversations: int, export: Path, config: Path) -> float:
    """Runs the import and prints its lines; returns when it started (perf_counter)."""
    size = export.stat().st_size
    started = time.perf_counter()
    took, said = run(["import", str(export), "--config", str(config)])
    # Read before any worker is waited for: only the import has ended by now.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"{kind}: {conversations} conversations, {size / 1024 / 1024:.1f} MB")
    print(f"import: {took:.1f} s ({conversations / took:.1f} conversations/s), peak RSS {peak:.0f} MB: {said[-1]}")
    for line in said[:-1]:
        print(f"  the import said: {line}")
    return started


def import_with_worker(kind: str, conversations: int, export: Path, config: Path, log: Path) -> None:
    """The import with a worker registered before it starts, until every stage is done."""
    store = open_store(load_config(config).storage)
    worker = None
    try:
        worker = start_worker(config, store, log)
        started = import_once(kind, conversations, export, config)
        searchable, done = until_done(store, started, worker, log)
        worker_peak = stop_worker(worker)
        print(f"searchable by meaning: {searchable:.1f} s from the import's start "
              f"({conversations / searchable:.1f} conversations/s)")
        print(f"every stage done: {done:.1f} s from the import's start "
              f"({conversations / done:.1f} conversations/s), worker peak RSS {worker_peak:.0f} MB")
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=120)
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--kind", choices=("chatgpt", "claude"), default="chatgpt")
    parser.add_argument("--no-worker", action="store_true", help="only the import: no time to searchable")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        config = work / "config.yaml"
        config.write_text(yaml.safe_dump({"storage": {"data_dir": "data"}, "worker": {"autostart": False}}))
        export = work / "conversations.json"
        write_export(export, options.kind, options.conversations)
        if options.no_worker:
            import_once(options.kind, options.conversations, export, config)
        else:
            import_with_worker(options.kind, options.conversations, export, config, work / "worker.log")
        again, again_said = run(["import", str(export), "--config", str(config)])
        print(f"again: {again:.1f} s: {again_said[-1]}")


if __name__ == "__main__":
    main()
