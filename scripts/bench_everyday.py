#!/usr/bin/env python3
"""Subjects and changed facts on the everyday set (issue 30), in-process.

../shared/bench/everyday/everyday_dev.json (README there): each user's memories are memorized,
oldest first, into a temporary store of its own with their original_time; the stages are run
here, synchronously, by the worker's own StageRunner and handlers. Then:
- `subject` items: the memory's preference or factual atom (its first atom otherwise) has a
  subject holding one of the expected words, or "self" for the person themself;
- `update` items (with --update, which also runs the embed and graph stages and loads the
  embedder): the question recalled at the default min_score answers the newer memory in the
  top 3, ranked above the older one.
Printed: the share right per kind and language, with every miss.

    .venv/bin/python scripts/bench_everyday.py
    .venv/bin/python scripts/bench_everyday.py --update
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aokun_worker.handlers import AtomsHandler, EmbedHandler, GraphHandler  # noqa: E402
from aokun_worker.runner import RunnerParts, StageRunner  # noqa: E402
from shared.assembly import open_services  # noqa: E402
from shared.config import AppConfig, StorageConfig  # noqa: E402
from shared.extract.atomize import AtomRules  # noqa: E402
from shared.extract.graph_rules import GraphBuilder  # noqa: E402
from shared.search.recall import RecallRequest, floors  # noqa: E402
from shared.store.documents import DocumentFilter, MemoryFields  # noqa: E402

DATASET = ROOT.parent / "shared" / "bench" / "everyday" / "everyday_dev.json"
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
PERSONA = "everyday"


def plan_date(plan, today: date) -> date:
    """A memory's `plan` as a date: N days from today, or next_week_<day>."""
    if isinstance(plan, str) and plan.startswith("next_week_"):
        monday = today - timedelta(days=today.weekday()) + timedelta(days=7)
        return monday + timedelta(days=WEEKDAYS.index(plan.removeprefix("next_week_")))
    return today + timedelta(days=int(plan))


def memory_text(memory: dict, today: date) -> str:
    if memory.get("plan") is None or "{date}" not in memory["text"]:
        return memory["text"]
    when = plan_date(memory["plan"], today)
    written = f"{when.month}月{when.day}日" if memory["lang"] == "zh" else f"{when:%B} {when.day}"
    return memory["text"].replace("{date}", written)


def load_user(services, memories: list[dict], now: datetime) -> dict[str, int]:
    """The memories stored oldest first: {key: memory id}."""
    ids = {}
    for memory in sorted(memories, key=lambda m: -float(m["said_days_ago"])):
        said = now - timedelta(days=float(memory["said_days_ago"]))
        fields = MemoryFields(persona_id=PERSONA, original_time=said.replace(tzinfo=None))
        ids[memory["key"]] = services.memories.memorize(memory_text(memory, now.date()), fields).id
    return ids


def run_stages(services, stages: tuple[str, ...]) -> None:
    config = services.config
    handlers = {"atoms": AtomsHandler(AtomRules.load(config.atoms.rules_file), services.segmenter, config.atoms)}
    if "embed" in stages:
        handlers["embed"] = EmbedHandler(services.embedder, config.queue.embed_batch_size, services.store)
        handlers["graph"] = GraphHandler(services.store, GraphBuilder(services.segmenter, config.graph),
                                         services.embedder)
    runner = StageRunner(RunnerParts(store=services.store, handlers=handlers, queue=config.queue,
                                     owner="bench-everyday"))
    for stage in stages:
        while runner.run_next(stage)[0]:
            pass


def subject_right(services, memory_id: int, expect) -> tuple[bool, str | None]:
    rows = services.store.atoms.of_memory(memory_id)
    chosen = next((r for r in rows if r["type"] in ("preference", "factual")), rows[0] if rows else None)
    subject = chosen["subject"] if chosen is not None else None
    if expect == "self":
        return subject == "self", subject
    words = [expect] if isinstance(expect, str) else expect
    return bool(subject) and any(w.casefold() in subject.casefold() for w in words), subject


def update_right(services, ids: dict[str, int], question: dict) -> tuple[bool, list]:
    newer, older = (ids[k] for k in question["expect"])
    request = RecallRequest(question["question"], 5, DocumentFilter(persona_id=PERSONA),
                            **floors(services.config.retrieval, None))
    ranked = [hit.document.id for hit in services.recaller.recall(request)]
    right = newer in ranked[:3] and (older not in ranked or ranked.index(older) > ranked.index(newer))
    names = {v: k for k, v in ids.items()}
    return right, [names.get(i, i) for i in ranked]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATASET)
    parser.add_argument("--update", action="store_true", help="also score the update questions (loads the embedder)")
    args = parser.parse_args()
    users = json.loads(args.data.read_text(encoding="utf-8"))["users"]
    now = datetime.now(timezone.utc)
    scores: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for name, user in users.items():
        langs = {m["key"]: m["lang"] for m in user["memories"]}
        with tempfile.TemporaryDirectory(prefix="aokun-everyday-") as folder:
            config = AppConfig(storage=StorageConfig(data_dir=Path(folder)))
            services = open_services(config, queued=False)
            try:
                ids = load_user(services, user["memories"], now)
                run_stages(services, ("atoms", "embed", "graph") if args.update else ("atoms",))
                for q in user["questions"]:
                    if q["kind"] == "subject":
                        right, got = subject_right(services, ids[q["memory"]], q["expect"])
                        scores[("subject", langs[q["memory"]])].append(right)
                    elif q["kind"] == "update" and args.update:
                        right, got = update_right(services, ids, q)
                        scores[("update", "zh" if any("\u4e00" <= c <= "\u9fff" for c in q["question"]) else "en")].append(right)
                    else:
                        continue
                    if not right:
                        print(f"miss {name} {q['kind']} {q.get('memory') or q['question']!r}: expected "
                              f"{q['expect']}, got {got}")
            finally:
                services.close()
    for kind in ("subject", "update"):
        marks = [m for (k, _), ms in scores.items() if k == kind for m in ms]
        if not marks:
            continue
        per_lang = ", ".join(f"{lang} {sum(ms)}/{len(ms)}" for (k, lang), ms in sorted(scores.items()) if k == kind)
        print(f"{kind}: {sum(marks)}/{len(marks)} = {sum(marks) / len(marks):.2f} ({per_lang})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
