#!/usr/bin/env python3
"""Recall quality on a benchmark from ../shared/bench, through the real MCP client.

Ingests every memory row with memorize (content; metadata participants, original_time from
`time`, session_id from `session` for conversation turns, key_facts = [content] where it fits
a key fact, persona_id = the row's group), waits until the workers have processed everything,
recalls every question with persona_id = its group and k = 10, writes a rankings file and
scores it with ../shared/bench/score.py.

    .venv/bin/python scripts/bench_recall.py locomo_dev
    .venv/bin/python scripts/bench_recall.py madial_zh_dev --channels bm25
    .venv/bin/python scripts/bench_recall.py locomo_dev --work bench_out/locomo  # reuse an ingest
    .venv/bin/python scripts/bench_recall.py locomo_dev --backend postgresql  # the store on PostgreSQL
    .venv/bin/python scripts/bench_recall.py --data bench_out/deep_facts deep_facts  # a set of our own
    .venv/bin/python scripts/bench_recall.py bench_out/deep_facts/deep_facts  # the same

A dataset is NAME.memories.jsonl and NAME.queries.jsonl in ../shared/bench/data, or in the
folder given by --data, or at a path prefix (DIR/NAME); score.py scores it from that folder.

With --work DIR the ingested store is kept in DIR and reused by later runs (any channels).
Every run also prints the figure per fold (scripts/folds.py: leave one LoCoMo conversation out;
MADial halves by dialogue number modulo 4). --tune SECTION.KEY=V1,V2 recalls once per value and
reports the honest figure: each fold scored with the value chosen on the other folds.
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
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from shared.store.model.documents import MAX_KEY_FACT_CHARS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import folds  # noqa: E402  (scripts/folds.py)
from bench_servers import DEFAULT_SERVER, bench_database  # noqa: E402

BENCH = ROOT.parent / "shared" / "bench"
BIN = Path(sys.executable).parent
CHANNELS = ["bm25", "vector", "graph_keyword", "graph_vector"]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


def write_config(work: Path, channels: list[str], options: list[str] = (), url: str = "") -> Path:
    raw = {
        "storage": {"data_dir": "data", **({"backend": "postgresql", "url": url} if url else {})},
        "worker": {"autostart": False},
        "memory": {"recall_max_k": 10},
        # No access reinforcement: a recall must not change the store a later run recalls from.
        "retrieval": {"channels": channels, "cache_enabled": False, "access_reinforcement": False},
        "server": {"max_content_chars": 100_000, "exposed_tools": ["memorize", "recall", "memory_stats"]},
    }
    for option in options:  # section.key=value, value in YAML
        name, value = option.split("=", 1)
        section, key = name.split(".", 1)
        raw.setdefault(section, {})[key] = yaml.safe_load(value)
    config = work / "config.yaml"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True))
    return config


def memorize_metadata(row: dict) -> dict:
    metadata = {"persona_id": row["group"]}
    if len(row["content"]) <= MAX_KEY_FACT_CHARS:
        # A turn or an event is one fact. A longer memory (a whole session, a fact deep in
        # filler) is past a key fact's limit: its atoms come from its own statements.
        metadata["key_facts"] = [row["content"]]
    if row.get("participants"):
        metadata["participants"] = [p for p in row["participants"] if p.strip()]
    if row.get("time"):
        metadata["original_time"] = row["time"]
    if row.get("session") and row.get("speaker"):
        # A host memorizing a conversation turn by turn names it: its turns are each other's
        # context. MADial's memories are separate events of a user's day, not turns.
        metadata["session_id"] = row["session"]
    return metadata


async def ingest(client: Client, memories: list[dict]) -> dict[int, str]:
    ids, retried = {}, 0
    for row in memories:
        for attempt in range(5):
            result = await client.call_tool("memorize", {"content": row["content"],
                                                         "metadata": memorize_metadata(row)})
            # "locked ... retry; nothing was stored": the worker's writes held the write lock
            # past storage.busy_timeout_ms (a loaded machine); the error says to retry.
            if not (result.is_error and "nothing was stored" in result.content[0].text
                    and "locked" in result.content[0].text and attempt < 4):
                break
            retried += 1
            await anyio.sleep(1)
        if result.is_error:
            raise SystemExit(f"memorize failed for {row['id']}: {result.content[0].text}")
        ids[result.structured_content["id"]] = row["id"]
    if retried:
        print(f"  {retried} memorize calls retried after the store stayed locked", file=sys.stderr)
    return ids


async def wait_drained(client: Client) -> None:
    started = time.monotonic()
    while True:
        stats = (await client.call_tool("memory_stats", {})).structured_content
        queue = stats["queue"]
        if queue["pending"] == 0 and queue["running"] == 0:
            if queue["failed"]:
                print(f"warning: {queue['failed']} stages failed", file=sys.stderr)
            return
        print(f"\r  waiting for workers: {queue['pending']} stages pending "
              f"({time.monotonic() - started:.0f} s)", end="", file=sys.stderr, flush=True)
        await anyio.sleep(2)


async def run(work: Path, data: Path, dataset: str, config: Path, out: Path) -> dict:
    ids_file = work / "ids.json"
    # The client's default environment drops PYTHONPATH: pass ours, so the server runs the
    # same code as this script and its worker (a checkout other than the installed one).
    server = StdioServerParameters(command=str(BIN / "aokun-server"), args=["--config", str(config)],
                                   env=dict(os.environ))
    queries = read_jsonl(data / f"{dataset}.queries.jsonl")
    async with Client(server) as client:
        if ids_file.exists():
            ids = {int(k): v for k, v in json.loads(ids_file.read_text()).items()}
        else:
            memories = read_jsonl(data / f"{dataset}.memories.jsonl")
            started = time.perf_counter()
            ids = await ingest(client, memories)
            print(f"  ingested {len(ids)} memories in {time.perf_counter() - started:.1f} s",
                  file=sys.stderr)
            ids_file.write_text(json.dumps(ids))
        # Also after a reused ingest: an upgrade may have queued new stages (atoms, graph).
        await wait_drained(client)
        print(file=sys.stderr)
        latencies = []
        with out.open("w", encoding="utf-8") as handle:
            for query in queries:
                started = time.perf_counter()
                result = await client.call_tool("recall", {"query": query["question"], "k": 10,
                                                           "persona_id": query["group"]})
                latencies.append(time.perf_counter() - started)
                if result.is_error:
                    raise SystemExit(f"recall failed for {query['id']}: {result.content[0].text}")
                ranked = [ids[r["id"]] for r in result.structured_content["results"] if r["id"] in ids]
                handle.write(json.dumps({"id": query["id"], "ranked": ranked}) + "\n")
    latencies.sort()
    return {"recall_p50_ms": 1000 * latencies[len(latencies) // 2],
            "recall_p95_ms": 1000 * latencies[int(len(latencies) * 0.95)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", help="locomo_dev, madial_zh_dev, madial_en_dev, ... (a name in the data"
                                        " folder), or a path prefix DIR/NAME")
    parser.add_argument("--data", type=Path, default=BENCH / "data",
                        help="folder holding NAME.memories.jsonl and NAME.queries.jsonl (default: %(default)s)")
    parser.add_argument("--channels", nargs="+", choices=CHANNELS, default=CHANNELS)
    parser.add_argument("--work", type=Path, help="keep (and reuse) the ingested store here")
    parser.add_argument("--out", type=Path, help="rankings file (default: WORK/rankings-CHANNELS.jsonl)")
    parser.add_argument("--set", dest="options", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a config option for this run, e.g. retrieval.mmr_enabled=false")
    parser.add_argument("--tune", metavar="SECTION.KEY=V1,V2,...",
                        help="recall once per value (same ingest) and report the held-out-fold figure:"
                             " each fold scored with the value that was best on the other folds")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--pg", default=DEFAULT_SERVER, help="PostgreSQL server for --backend postgresql")
    args = parser.parse_args()
    if "/" in args.dataset:  # a path prefix: DIR/NAME
        args.data, args.dataset = Path(args.dataset).parent, Path(args.dataset).name
    for kind in ("memories", "queries"):
        if not (args.data / f"{args.dataset}.{kind}.jsonl").is_file():
            parser.error(f"no {args.data / f'{args.dataset}.{kind}.jsonl'}")
    temp = None if args.work else tempfile.TemporaryDirectory()
    work = args.work or Path(temp.name)
    work.mkdir(parents=True, exist_ok=True)
    if args.backend == "postgresql":
        with bench_database(args.pg, args.work) as url:
            bench(args, work, url)
    else:
        bench(args, work, "")
    if temp is not None:
        temp.cleanup()


def bench(args, work: Path, url: str) -> None:
    candidates = _candidates(args.tune)
    config = write_config(work, args.channels, args.options + candidates[0][1], url)
    worker = subprocess.Popen([str(BIN / "aokun-worker"), "--config", str(config)],
                              stdout=subprocess.DEVNULL, stderr=(work / "worker.log").open("ab"))
    scored = {}
    try:
        for label, extra in candidates:
            config = write_config(work, args.channels, args.options + extra, url)
            suffix = f"-{label.replace('=', '_').replace('/', '_')}" if label != "as configured" else ""
            out = args.out or work / f"rankings-{'+'.join(args.channels)}{suffix}.jsonl"
            figures = anyio.run(run, work, args.data, args.dataset, config, out)
            print(f"{args.dataset} channels={'+'.join(args.channels)} {' '.join(args.options + extra)}  "
                  f"recall p50 {figures['recall_p50_ms']:.1f} ms, p95 {figures['recall_p95_ms']:.1f} ms")
            subprocess.run([sys.executable, str(BENCH / "score.py"), args.dataset, str(out),
                            "--data-dir", str(args.data)], check=True)
            scored[label] = _per_query(args.data, args.dataset, out)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    _fold_report(args.data, args.dataset, scored)


def _candidates(tune: str | None) -> list[tuple[str, list[str]]]:
    """(label, extra --set options) per value to try; the first is the default's place."""
    if not tune:
        return [("as configured", [])]
    name, values = tune.split("=", 1)
    return [(f"{name}={value}", [f"{name}={value}"]) for value in values.split(",")]


def _per_query(data: Path, dataset: str, rankings_file: Path) -> dict[str, float]:
    sys.path.insert(0, str(BENCH))
    import score  # ../shared/bench/score.py (stdlib only)

    queries = read_jsonl(data / f"{dataset}.queries.jsonl")
    rankings = {r["id"]: r["ranked"] for r in read_jsonl(rankings_file)}
    return folds.per_query(queries, rankings, score.score_one)


def _fold_report(data: Path, dataset: str, scored: dict[str, dict[str, float]]) -> None:
    queries = read_jsonl(data / f"{dataset}.queries.jsonl")
    fold_ids = folds.folds(dataset, queries)
    if len(scored) > 1:
        print(folds.report(dataset, "tuned on the other folds", folds.held_out(fold_ids, scored)))
    for label, scores in scored.items():
        print(folds.report(dataset, label, folds.held_out(fold_ids, {label: scores})))


if __name__ == "__main__":
    main()
