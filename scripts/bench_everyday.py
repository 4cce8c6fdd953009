#!/usr/bin/env python3
"""Every kind of the everyday set (../shared/bench/everyday, README there), in-process.

Each user's memories are memorized, oldest first, into a temporary store of its own
(original_time = now minus said_days_ago on the user's clock, {date} written as the memory's
language writes it); the worker's atoms, embed and graph stages run here by its StageRunner;
then the user's questions are recalled at the default floors (`floors(retrieval, None)`, as
the recall tool without min_score; the recall cache is off) and scored:
- fact: an expected memory in the top 3; xlang: the fact questions asked in another language
  than their memory's (Han characters: zh, else en), also counted in fact;
- window: every plan inside the window in the top 5, no plan outside it ranked above one;
- update: the newer memory in the top 3, ranked above the older one;
- unknown: no result at all;
- subject: the memory's preference/factual atom (else its first) has a subject holding an
  expected word ("self": the person themself).
Printed: right/total and share per kind, split by language, and every miss with what came back.

--set section.key=value (repeatable; a YAML value) changes the config of the run.
--tune section.key=v1,v2,... runs once per value (a retrieval key: each store loaded once and
only the recaller rebuilt) and prints each value's figures, then held-out ones: the two users
are folds, each scored at the value that is best on the other (mean of the fact, window,
update and unknown shares; ties: the first listed). --json PATH writes every question's result;
--no-windows recalls as if no question named a time window, for comparison.

    .venv/bin/python scripts/bench_everyday.py [--set embedding.local_model=use]
    .venv/bin/python scripts/bench_everyday.py --tune retrieval.min_best_score=0,0.1,0.145
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aokun_worker.handlers import AtomsHandler, EmbedHandler, GraphHandler  # noqa: E402
from aokun_worker.runner import RunnerParts, StageRunner  # noqa: E402
from shared.assembly import open_services  # noqa: E402
from shared.config import AppConfig, build_config  # noqa: E402
from shared.extract.atomize import AtomRules  # noqa: E402
from shared.extract.graph_rules import GraphBuilder  # noqa: E402
from shared.safe_yaml import safe_load  # noqa: E402
from shared.search import timeframe  # noqa: E402
from shared.search.recall import RecallRequest, floors  # noqa: E402
from shared.store.model.documents import DocumentFilter, MemoryFields  # noqa: E402
from shared.time_zone import user_zone  # noqa: E402

DATASET = ROOT.parent / "shared" / "bench" / "everyday" / "everyday_dev.json"
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
KINDS = ("fact", "xlang", "window", "update", "unknown", "subject")
FOLD_KINDS = ("fact", "window", "update", "unknown")
PERSONA = "everyday"
K = 10  # recalled per question: the scores need 5, the misses show more


def next_monday(today: date) -> date:
    return today - timedelta(days=today.weekday()) + timedelta(days=7)


def plan_date(plan, today: date) -> date:
    """A memory's `plan` as a date: N days from today, or next_week_<day>."""
    if isinstance(plan, str) and plan.startswith("next_week_"):
        return next_monday(today) + timedelta(days=WEEKDAYS.index(plan.removeprefix("next_week_")))
    return today + timedelta(days=int(plan))


def window_days(name: str, today: date) -> tuple[date, date]:
    """The first and last days of a named window."""
    if name == "next_week":
        return next_monday(today), next_monday(today) + timedelta(days=6)
    if name == "tomorrow":
        return today + timedelta(days=1), today + timedelta(days=1)
    return today + timedelta(days=1), today + timedelta(days=int(name.split("_")[1]))  # next_21_days


def memory_text(memory: dict, today: date) -> str:
    if memory.get("plan") is None or "{date}" not in memory["text"]:
        return memory["text"]
    when = plan_date(memory["plan"], today)
    written = f"{when.month}月{when.day}日" if memory["lang"] == "zh" else f"{when:%B} {when.day}"
    return memory["text"].replace("{date}", written)


def language(text: str) -> str:
    return "zh" if any("\u4e00" <= c <= "\u9fff" for c in text) else "en"


def settings_of(pairs: list[str]) -> dict[str, object]:
    """--set/--tune arguments `section.key=value` as {section.key: parsed YAML value}."""
    split = [pair.partition("=") for pair in pairs]
    wrong = [key + sep + value for key, sep, value in split if not sep or "." not in key]
    if wrong:
        raise SystemExit(f"expected section.key=value, got {wrong}")
    return {key.strip(): safe_load(value) for key, _, value in split}


def config_of(settings: dict[str, object], data_dir: Path) -> AppConfig:
    """The config a run uses, read by the loader every process uses (shared.config)."""
    raw: dict[str, dict] = {"storage": {"data_dir": str(data_dir)}, "retrieval": {"cache_enabled": False}}
    for key, value in settings.items():
        section, name = key.split(".", 1)
        raw.setdefault(section, {})[name] = value
    return build_config(raw, ROOT)


def load_user(services, memories: list[dict], now: datetime, persona: str = PERSONA) -> dict[str, int]:
    """The memories stored oldest first, and every stage run: {key: memory id}."""
    ids = {}
    for memory in sorted(memories, key=lambda m: -float(m["said_days_ago"])):
        said = now - timedelta(days=float(memory["said_days_ago"]))
        fields = MemoryFields(persona_id=persona, original_time=said)
        ids[memory["key"]] = services.memories.memorize(memory_text(memory, now.date()), fields).id
    config = services.live.now
    handlers = {
        "atoms": AtomsHandler(AtomRules.load(config.atoms.rules_file), services.segmenter, config.atoms,
                              user_zone(config.memory.time_zone)),
        "embed": EmbedHandler(services.embedder, config.queue.embed_batch_size, services.store),
        "graph": GraphHandler(services.store, GraphBuilder(services.segmenter, config.graph), services.embedder.model)}
    runner = StageRunner(RunnerParts(store=services.store, handlers=handlers, queue=config.queue,
                                     owner="bench-everyday"))
    for stage in ("atoms", "embed", "graph"):
        while runner.run_next(stage)[0]:
            pass
    return ids


def recalled(services, question: str, keys: dict[int, str], zone: tzinfo) -> list[tuple[str, float]]:
    request = RecallRequest(question, K, DocumentFilter(persona_id=PERSONA), zone=zone,
                            **floors(services.live.now.retrieval, None))
    return [(keys.get(h.document.id, str(h.document.id)), round(h.score, 4))
            for h in services.recaller.recall(request)]


def subject_of(services, memory_id: int, expect) -> tuple[str | None, bool]:
    """The subject of the memory's preference/factual atom (else its first), and whether right."""
    rows = services.store.atoms.of_memory(memory_id)
    chosen = next((r for r in rows if r["type"] in ("preference", "factual")), rows[0] if rows else None)
    subject = chosen["subject"] if chosen is not None else None
    words = [expect] if isinstance(expect, str) else expect
    right = subject == "self" if expect == "self" else \
        bool(subject) and any(w.casefold() in subject.casefold() for w in words)
    return subject, right


def window_right(ranked: list[str], plans: dict[str, date], inside: set[str]) -> bool:
    if not inside <= set(ranked[:5]):
        return False
    last_inside = max((ranked.index(key) for key in inside), default=0)
    return not any(key in plans and key not in inside for key in ranked[:last_inside])


def score_user(services, name: str, user: dict, ids: dict[str, int], now: datetime) -> list[dict]:
    """One result per question: user, kind, lang, question, expected, returned, right."""
    today, zone = now.date(), now.tzinfo
    keys = {v: k for k, v in ids.items()}
    langs = {m["key"]: m["lang"] for m in user["memories"]}
    plans = {m["key"]: plan_date(m["plan"], today) for m in user["memories"] if m.get("plan") is not None}
    results = []
    for q in user["questions"]:
        kind, expect = q["kind"], q["expect"]
        row = {"user": name, "kind": kind, "question": q["question"], "expected": expect}
        if kind == "subject":
            subject, right = subject_of(services, ids[q["memory"]], expect)
            row.update(question=q["memory"], lang=langs[q["memory"]], returned=subject, right=right)
            results.append(row)
            continue
        returned = recalled(services, q["question"], keys, zone)
        ranked = [key for key, _ in returned]
        row.update(lang=language(q["question"]), returned=returned)
        if kind == "fact":
            row["right"] = any(key in ranked[:3] for key in expect)
            row["xlang"] = all(langs[key] != row["lang"] for key in expect)
        elif kind == "window":
            first, last = window_days(expect, today)
            inside = {key for key, day in plans.items() if first <= day <= last}
            row.update(inside=sorted(inside), right=window_right(ranked, plans, inside))
        elif kind == "update":
            newer, older = expect
            row["right"] = newer in ranked[:3] and (older not in ranked or ranked.index(older) > ranked.index(newer))
        elif kind == "unknown":
            row["right"] = not returned
        else:
            continue
        results.append(row)
    return results


def tally(rows: list[dict]) -> dict[str, dict[str, list[bool]]]:
    """{kind: {lang or "all": [right, ...]}}."""
    marks: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for kind in (row["kind"], "xlang") if row.get("xlang") else (row["kind"],):
            marks[kind]["all"].append(row["right"])
            marks[kind][row["lang"]].append(row["right"])
    return marks


def share(marks: list[bool]) -> float:
    return sum(marks) / len(marks) if marks else float("nan")


def fold_mean(rows: list[dict]) -> float:
    marks = tally(rows)
    return sum(share(marks[kind]["all"]) for kind in FOLD_KINDS) / len(FOLD_KINDS)


def print_kinds(rows: list[dict], indent: str = "") -> None:
    marks = tally(rows)
    for kind in KINDS:
        if kind not in marks:
            continue
        by_lang = ", ".join(f"{lang} {sum(m)}/{len(m)}" for lang, m in sorted(marks[kind].items()) if lang != "all")
        every = marks[kind]["all"]
        print(f"{indent}{kind:<8} {sum(every):>3}/{len(every):<3} = {share(every):.2f}  ({by_lang})")


def print_misses(rows: list[dict]) -> None:
    for row in rows:
        if row["right"]:
            continue
        got = row["returned"] if row["kind"] == "subject" else \
            ", ".join(f"{key} {score:.3f}" for key, score in row["returned"]) or "nothing"
        flag = " (xlang)" if row.get("xlang") else ""
        print(f"miss {row['user']} {row['kind']}{flag} {row['question']!r}: "
              f"expected {row.get('inside', row['expected'])}, got {got}")


def bench(users: dict, settings: dict, tuned: str | None, values: list) -> dict[int, list[dict]]:
    """{index of the value: results}; without --tune, one run at index 0."""
    runs = [dict(settings, **({tuned: v} if tuned else {})) for v in values or [None]]
    zone = user_zone(config_of(runs[0], Path("unused")).memory.time_zone)
    now = datetime.now(zone)
    results: dict[int, list[dict]] = defaultdict(list)
    reuse = tuned is None or tuned.startswith("retrieval.")
    for name, user in users.items():
        for first in range(len(runs)) if not reuse else [0]:
            with tempfile.TemporaryDirectory(prefix="aokun-everyday-") as folder:
                services = open_services(config_of(runs[first], Path(folder)), queued=False)
                try:
                    ids = load_user(services, user["memories"], now)
                    for i in range(first, len(runs) if reuse else first + 1):
                        services.live.replace(config_of(runs[i], Path(folder)))  # rebuilds the recaller
                        results[i] += score_user(services, name, user, ids, now)
                finally:
                    services.close()
    return results


def print_tuning(tuned: str, values: list, results: dict[int, list[dict]], users: list[str]) -> None:
    header = "  ".join(f"{k:>7}" for k in KINDS) + "  " + "  ".join(f"{'mean ' + u:>9}" for u in users)
    print(f"{tuned:>28}  {header}")
    for i, value in enumerate(values):
        marks = tally(results[i])
        cells = "  ".join(f"{share(marks[k]['all']):>7.2f}" for k in KINDS)
        means = "  ".join(f"{fold_mean([r for r in results[i] if r['user'] == u]):>9.3f}" for u in users)
        print(f"{value!s:>28}  {cells}  {means}")
    held_out = []
    for user in users:
        other = [u for u in users if u != user]
        means = [fold_mean([r for r in results[i] if r["user"] in other]) for i in range(len(values))]
        chosen = means.index(max(means))
        rows = [r for r in results[chosen] if r["user"] == user]
        held_out += rows
        print(f"\n{user}: {tuned}={values[chosen]} (chosen on {', '.join(other)}: mean {means[chosen]:.3f});"
              f" {user} there: mean {fold_mean(rows):.3f}")
        print_kinds(rows, "  ")
    print("\nheld out, both users:")
    print_kinds(held_out, "  ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATASET)
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--tune", metavar="SECTION.KEY=V1,V2,...")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write every question's result here")
    parser.add_argument("--no-windows", action="store_true", help="recall reading no time window, to compare")
    args = parser.parse_args()
    if args.no_windows:  # as if no question named a window (recall reads it through this function)
        timeframe.read = lambda *args, **kwargs: None
    users = json.loads(args.data.read_text(encoding="utf-8"))["users"]
    tuned, values = None, []
    if args.tune:
        key, _, listed = args.tune.partition("=")
        tuned = key.strip()
        values = [settings_of([f"{tuned}={v}"])[tuned] for v in listed.split(",")]
    results = bench(users, settings_of(args.set), tuned, values)
    if tuned:
        print_tuning(tuned, values, results, list(users))
    else:
        print_misses(results[0])
        print_kinds(results[0])
    if args.json:
        rows = [dict(r, **({tuned: values[i]} if tuned else {})) for i, rs in sorted(results.items()) for r in rs]
        args.json.write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
