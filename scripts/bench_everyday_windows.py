#!/usr/bin/env python3
"""Time-window questions of ../shared/bench/everyday (its README defines the set), in-process.

Each user's memories are memorized into a temporary store (persona = the user, original_time =
now minus said_days_ago, {date} written as the memory's language writes it), the worker's
stages (embed, atoms, graph) run here synchronously, and the user's questions are asked through
the recall path with the default floors. Printed: the share of `window` questions right (every
plan inside the window in the top 5, and no plan outside it ranked above any of them) and of
`fact` questions answered (an expected memory in the top 3), with the time windows read
(as now) and without (--no-windows: recall as it was before, for comparison).

    .venv/bin/python scripts/bench_everyday_windows.py [--no-windows] [--show]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATASET = ROOT.parent / "shared" / "bench" / "everyday" / "everyday_dev.json"
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def plan_day(plan, today: date) -> date | None:
    if plan is None:
        return None
    if isinstance(plan, str):  # next_week_wed
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=1)
        return monday + timedelta(days=WEEKDAYS.index(plan.rsplit("_", 1)[1]))
    return today + timedelta(days=plan)


def written(day: date, lang: str) -> str:
    return f"{day.month}月{day.day}日" if lang == "zh" else f"{day:%B} {day.day}"


def window_days(name: str, today: date) -> tuple[date, date]:
    """[first, last] days of a named window."""
    if name == "next_week":
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=1)
        return monday, monday + timedelta(days=6)
    if name == "tomorrow":
        return today + timedelta(days=1), today + timedelta(days=1)
    days = int(name.split("_")[1])  # next_21_days
    return today + timedelta(days=1), today + timedelta(days=days)


def window_right(ranked: list[str], plans: dict[str, date], first: date, last: date) -> bool:
    inside = {key for key, day in plans.items() if first <= day <= last}
    top = ranked[:5]
    if not inside <= set(top):
        return False
    last_inside = max(ranked.index(key) for key in inside) if inside else -1
    return not any(key in plans and key not in inside for key in ranked[:last_inside])


def memorize_user(services, user: str, memories: list[dict], now: datetime, today: date) -> dict[int, str]:
    from shared.store.documents import MemoryFields

    keys = {}
    for memory in memories:
        day = plan_day(memory["plan"], today)
        text = memory["text"].replace("{date}", written(day, memory["lang"])) if day else memory["text"]
        said = now - timedelta(days=memory["said_days_ago"])
        document = services.memories.memorize(text, MemoryFields(persona_id=user, original_time=said))
        keys[document.id] = memory["key"]
    return keys


def run_stages(services) -> None:
    """What a worker would do, here and now: every pending stage, in order."""
    from aokun_worker.service import WorkerService

    worker = WorkerService(services)
    for stage in ("embed", "atoms", "graph"):
        while worker.runner.run_next(stage)[0]:
            pass


def ask(services, user: str, question: str, k: int) -> list[int]:
    from shared.search.recall import RecallRequest, floors
    from shared.store.documents import DocumentFilter

    config = services.live.current
    request = RecallRequest(question, k, DocumentFilter(persona_id=user),
                            **floors(config.retrieval, None))
    return [hit.document.id for hit in services.recaller.recall(request)]


def bench(work: Path, windows: bool, show: bool) -> dict[str, list[bool]]:
    from shared.assembly import open_services
    from shared.config import load_config

    if not windows:  # recall as before: no question names a window
        from shared.search import timeframe
        timeframe.read = lambda *args, **kwargs: None
    config_file = work / "config.yaml"
    config_file.write_text(yaml.safe_dump({
        "storage": {"data_dir": str(work / "data")}, "worker": {"autostart": False},
        "retrieval": {"cache_enabled": False, "access_reinforcement": False}}))
    services = open_services(load_config(config_file), queued=False)
    now = datetime.now(timezone.utc)
    today = now.date()
    data = json.loads(DATASET.read_text(encoding="utf-8"))
    outcome: dict[str, list[bool]] = {"window": [], "fact": []}
    try:
        keys = {}
        for user, content in data["users"].items():
            keys.update(memorize_user(services, user, content["memories"], now, today))
        run_stages(services)
        for user, content in data["users"].items():
            plans = {m["key"]: plan_day(m["plan"], today) for m in content["memories"] if m["plan"] is not None}
            for q in content["questions"]:
                if q["kind"] not in outcome:
                    continue
                ranked = [keys[i] for i in ask(services, user, q["question"], 10)]
                if q["kind"] == "window":
                    right = window_right(ranked, plans, *window_days(q["expect"], today))
                else:
                    right = any(key in ranked[:3] for key in q["expect"])
                outcome[q["kind"]].append(right)
                if show:
                    print(f"  {'ok ' if right else 'MISS'} {user} {q['kind']}: {q['question']} -> {ranked[:5]}")
    finally:
        services.close()
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-windows", action="store_true", help="recall without reading time windows (before)")
    parser.add_argument("--show", action="store_true", help="print each question, right or not, and its top 5")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        outcome = bench(Path(temp), not args.no_windows, args.show)
    label = "without time windows" if args.no_windows else "with time windows"
    for kind, results in outcome.items():
        print(f"everyday {kind} ({label}): {sum(results)}/{len(results)} right = "
              f"{sum(results) / max(1, len(results)):.3f}")


if __name__ == "__main__":
    main()
