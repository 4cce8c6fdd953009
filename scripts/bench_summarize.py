#!/usr/bin/env python3
"""The summarizer measured on LoCoMo's own annotations (../shared/bench, read there, never copied).

1. Turn selection: precision / recall / F1 of the turns the key facts come from against the
   turns the annotators' observations cite (locomo_sessions_dev.jsonl), and the share of turns
   kept. The fact weights (shared/summarize/facts.py FactWeights: words, typed, answer, dated,
   image and the threshold; first_person is the unit) are chosen on four conversations and
   scored on the fifth, for each of the five (leave one conversation out); the held-out mean
   and spread are the figures. Baselines: every turn; first-person statements of six words or more.
2. Time per session of the rules provider (median, p95).
3. Recall through summaries: every session stored as its summarized memory (one memorize per
   session: content = summary, the memory's fields as metadata, persona = conversation,
   original_time = session time) against every session stored raw (content = transcript),
   through a real aokun-server over stdio with the official MCP client and a worker;
   locomo_session_dev's questions recalled within their conversation, R@1 / R@5 by
   ../shared/bench/score.py, per conversation too. With several --person-keywords values, one
   summarized store each and the honest figure: each conversation scored with the value that
   did best on the other four (scripts/folds.py).

    .venv/bin/python scripts/bench_summarize.py                 # all three, rules provider
    .venv/bin/python scripts/bench_summarize.py --skip-recall   # selection and timing only
    .venv/bin/python scripts/bench_summarize.py --no-raw --person-keywords 8,12,16
    .venv/bin/python scripts/bench_summarize.py --provider llm --config config.yaml
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import bench_recall  # noqa: E402  (scripts/bench_recall.py: config, worker wait, dataset reading)
import folds  # noqa: E402
from shared.config import AppConfig, load_config  # noqa: E402
from shared.extract.atomize import AtomRules  # noqa: E402
from shared.summarize.conversation import Turn, transcript  # noqa: E402
from shared.summarize.facts import FactWeights, TurnReading, score  # noqa: E402
from shared.summarize.rules import PERSON_KEYWORDS, RulesSummarizer  # noqa: E402
from shared.text.segment import Segmenter  # noqa: E402

BENCH = bench_recall.BENCH
SESSIONS = BENCH / "data" / "locomo_sessions_dev.jsonl"
# The grid the fact weights are chosen from (first_person is the unit); the threshold is every
# score seen on the training folds.
GRID = {"words": (0.5, 1.0, 1.5, 2.0), "typed": (0.0, 0.5, 1.0), "answer": (1.0, 2.0, 3.0),
        "dated": (0.0, 1.0, 2.0), "image": (0.0, 0.5, 1.0)}
MAX_KEPT = 0.5


def sessions() -> list[dict]:
    return bench_recall.read_jsonl(SESSIONS)


def turns_of(session: dict) -> list[Turn]:
    when = datetime.fromisoformat(session["time"]) if session.get("time") else None
    return [Turn(t["speaker"], t["text"], when) for t in session["turns"]]


def evidence_of(session: dict) -> set[str]:
    return {e for o in session["observations"] for e in o["evidence"]}


# -- 1. turn selection --------------------------------------------------------------------------

def prf(kept: list[tuple[bool, bool]]) -> dict:
    """kept: (selected, evidence) per turn -> precision, recall, F1, share kept."""
    chosen = sum(s for s, _ in kept)
    hits = sum(s and e for s, e in kept)
    relevant = sum(e for _, e in kept)
    p = hits / chosen if chosen else 0.0
    r = hits / relevant if relevant else 0.0
    return {"p": p, "r": r, "f1": 2 * p * r / (p + r) if p + r else 0.0, "kept": chosen / len(kept)}


def best_on(rows: list[tuple[TurnReading, bool, str]]) -> FactWeights:
    """The weights and threshold with the best F1 on rows while keeping at most MAX_KEPT (turns
    with a typed first-person statement are kept whatever the weights)."""
    relevant, best = sum(e for _, e, _ in rows), None
    always = [e for r, e, _ in rows if r.about_self]
    for values in itertools.product(*GRID.values()):
        weights = replace(FactWeights(), **dict(zip(GRID, values)))
        ranked = sorted(((score(r, weights), e) for r, e, _ in rows if not r.about_self), key=lambda p: -p[0])
        hits = sum(always)
        for n, (value, is_evidence) in enumerate(ranked, 1):
            hits += is_evidence
            chosen = len(always) + n
            if chosen / len(rows) > MAX_KEPT:
                break
            if n < len(ranked) and ranked[n][0] == value:
                continue  # a threshold keeps every turn of its score
            f1 = 2 * hits / (chosen + relevant)
            if best is None or f1 > best[0]:
                best = (f1, replace(weights, threshold=value))
    return best[1]


def turn_selection(summarizer: RulesSummarizer, data: list[dict], config: AppConfig) -> dict:
    """Weights chosen on the turns' features; every figure is scored on the key facts the
    summarizer (with those weights) actually makes, by the dia_id of each fact's source turn."""
    rows = []  # (reading, is evidence, conversation) per turn
    baseline = []
    for session in data:
        evidence = evidence_of(session)
        for reading, raw in zip(summarizer.read(turns_of(session)), session["turns"]):
            is_evidence = raw["dia_id"] in evidence
            rows.append((reading, is_evidence, session["group"]))
            words = raw["text"].split()
            first_person = any(w.lower().strip(",.!?") in ("i", "i'm", "i've", "my", "me", "we", "our") for w in words)
            baseline.append((first_person and len(words) >= 6, is_evidence))
    groups = sorted({g for _, _, g in rows})
    fold_results = {}
    for held in groups:
        weights = best_on([row for row in rows if row[2] != held and row[0].statements])
        chosen = replace_weights(summarizer, weights)
        fold_results[held] = (weights, prf(fact_turns(chosen, [s for s in data if s["group"] == held], config)))
    return {"folds": fold_results,
            "shipped": prf(fact_turns(summarizer, data, config)),
            "chosen_on_all": best_on([row for row in rows if row[0].statements]),
            "always": prf([(r.about_self, e) for r, e, _ in rows]),
            "keep_all": prf([(True, e) for _, e, _ in rows]),
            "first_person_6": prf(baseline)}


def replace_weights(summarizer: RulesSummarizer, weights: FactWeights) -> RulesSummarizer:
    return RulesSummarizer(summarizer.atom_rules, summarizer.segmenter, weights, summarizer.person_keywords)


def fact_turns(summarizer: RulesSummarizer, data: list[dict], config: AppConfig) -> list[tuple[bool, bool]]:
    """(a key fact comes from this turn, the turn is evidence) for every turn of data."""
    kept = []
    for session in data:
        sources = {session["turns"][f.turn_index]["dia_id"]
                   for f in summarizer.distil(turns_of(session), config.summarizer).facts}
        evidence = evidence_of(session)
        kept += [(t["dia_id"] in sources, t["dia_id"] in evidence) for t in session["turns"]]
    return kept


def print_selection(result: dict) -> None:
    print("## Turn selection (key facts' source turns vs observations' evidence turns)")
    for name in ("keep_all", "first_person_6"):
        m = result[name]
        print(f"  baseline {name:15}: P {m['p']:.3f} R {m['r']:.3f} F1 {m['f1']:.3f} kept {m['kept']:.0%}")
    f1s = [m["f1"] for _, m in result["folds"].values()]
    kept = [m["kept"] for _, m in result["folds"].values()]
    print(f"  rules, held out (leave one conversation out): F1 {statistics.fmean(f1s):.3f} ± "
          f"{statistics.pstdev(f1s):.3f} (min {min(f1s):.3f}, max {max(f1s):.3f}), kept "
          f"{statistics.fmean(kept):.0%} (max {max(kept):.0%})")
    for group, (weights, m) in result["folds"].items():
        print(f"    {group}: P {m['p']:.3f} R {m['r']:.3f} F1 {m['f1']:.3f} kept {m['kept']:.0%}   "
              f"chosen on the others: {_weights_text(weights)}")
    print(f"  turns kept by the rule for Chinese or short-turn chats (facts.SHORT_CHAT_WORDS): "
          f"{result['always']['kept']:.0%}")
    m = result["shipped"]
    print(f"  shipped FactWeights ({_weights_text(FactWeights())}), all 5 conversations (in-sample): "
          f"P {m['p']:.3f} R {m['r']:.3f} F1 {m['f1']:.3f} kept {m['kept']:.0%}")
    print(f"  chosen on all 5 conversations: {_weights_text(result['chosen_on_all'])}")


def _weights_text(w: FactWeights) -> str:
    return " ".join(f"{k}={getattr(w, k):g}" for k in (*GRID, "threshold"))


# -- 2. time per session ------------------------------------------------------------------------

def timing(summarizer: RulesSummarizer, data: list[dict], config: AppConfig) -> dict:
    summarizer.summarize(turns_of(data[0]), config.summarizer)  # jieba and word lists loaded
    spent = []
    for session in data:
        turns = turns_of(session)
        started = time.perf_counter()
        summarizer.summarize(turns, config.summarizer)
        spent.append(1000 * (time.perf_counter() - started))
    spent.sort()
    return {"median_ms": statistics.median(spent), "p95_ms": spent[int(0.95 * (len(spent) - 1))],
            "max_ms": spent[-1], "turns_median": statistics.median(len(s["turns"]) for s in data)}


# -- 3. recall through summaries ----------------------------------------------------------------

async def recall_store(work: Path, calls: list[tuple[str, str, dict]], queries: list[dict]) -> dict[str, list[str]]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    config = bench_recall.write_config(work, bench_recall.CHANNELS)
    worker = subprocess.Popen([str(bench_recall.BIN / "aokun-worker"), "--config", str(config)],  # noqa: ASYNC220 - once, before the client starts
                              stdout=subprocess.DEVNULL, stderr=(work / "worker.log").open("ab"))
    server = StdioServerParameters(command=str(bench_recall.BIN / "aokun-server"), args=["--config", str(config)])
    rankings = {}
    try:
        async with Client(server) as client:
            ids = {}
            for session_id, content, metadata in calls:
                result = await client.call_tool("memorize", {"content": content, "metadata": metadata})
                if result.is_error:
                    raise SystemExit(f"memorize failed for {session_id}: {result.content[0].text}")
                ids[result.structured_content["id"]] = session_id
            await bench_recall.wait_drained(client)
            print(file=sys.stderr)
            for query in queries:
                result = await client.call_tool("recall", {"query": query["question"], "k": 10,
                                                           "persona_id": query["group"]})
                if result.is_error:
                    raise SystemExit(f"recall failed for {query['id']}: {result.content[0].text}")
                rankings[query["id"]] = [ids[r["id"]] for r in result.structured_content["results"] if r["id"] in ids]
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    return rankings


def recall_through_summaries(data: list[dict], summarizers: dict, work: Path, raw: bool) -> dict:
    """{store: figures} for the raw sessions (when raw) and for each summarizer {label: function};
    with several summarizers also "tuned": each conversation scored with the summarizer that did
    best on the other four."""
    import anyio

    sys.path.insert(0, str(BENCH))
    import score  # ../shared/bench/score.py (stdlib only)

    queries = bench_recall.read_jsonl(BENCH / "data" / "locomo_session_dev.queries.jsonl")
    fold_ids = folds.folds("locomo_session_dev", queries)
    stores = {"raw": raw_calls(data)} if raw else {}
    stores.update({label: summarized_calls(data, summarize) for label, summarize in summarizers.items()})
    out, per_label = {}, {}
    for label, calls in stores.items():
        store = work / label.replace(" ", "_").replace("=", "-")
        store.mkdir(parents=True, exist_ok=True)
        rankings = anyio.run(recall_store, store, calls, queries)
        (store / "rankings.jsonl").write_text("".join(json.dumps({"id": k, "ranked": v}) + "\n"
                                                      for k, v in rankings.items()))
        overall = score.score(queries, rankings)["overall"]
        per_label[label] = folds.per_query(queries, rankings, score.score_one)
        out[label] = {"r1": overall["recall@1"], "r5": overall["recall@5"], "r10": overall["recall@10"],
                      "folds": folds.held_out(fold_ids, {label: per_label[label]}),
                      "chars": statistics.fmean(len(c) for _, c, _ in calls)}
    if len(summarizers) > 1:
        out["tuned"] = folds.held_out(fold_ids, {label: per_label[label] for label in summarizers})
    return out


def raw_calls(data: list[dict]) -> list[tuple[str, str, dict]]:
    """(session id, content, metadata): the transcript as it is."""
    calls = []
    for session in data:
        turns = turns_of(session)
        speakers = list(dict.fromkeys(t.speaker for t in turns))
        calls.append((session["id"], transcript(turns), {**_scope(session), "participants": speakers}))
    return calls


def summarized_calls(data: list[dict], summarize) -> list[tuple[str, str, dict]]:
    """(session id, content, metadata): the summary, the memory's fields as metadata."""
    calls = []
    for session in data:
        memory = summarize(turns_of(session))
        fields = {"topics": memory.topics, "participants": memory.participants, "key_facts": memory.key_facts,
                  "sentiment": memory.sentiment, "importance": memory.importance}
        if memory.persona_summary:
            fields["persona_summary"] = memory.persona_summary
        calls.append((session["id"], memory.summary, {**_scope(session), **fields}))
    return calls


def _scope(session: dict) -> dict:
    scope = {"persona_id": session["group"]}
    if session.get("time"):
        scope["original_time"] = session["time"]
    return scope


def print_recall(result: dict) -> None:
    print("## Recall through summaries (locomo_session_dev, 997 questions, session level)")
    tuned = result.pop("tuned", None)
    for name, m in result.items():
        f = m["folds"]
        print(f"  {name:10}: R@1 {m['r1']:.3f}  R@5 {m['r5']:.3f}  R@10 {m['r10']:.3f}   per conversation "
              f"R@5 {f['mean']:.3f} ± {f['spread']:.3f} (min {f['min']:.3f}, max {f['max']:.3f}); "
              f"content {m['chars']:.0f} chars on average")
    if tuned:
        print("  " + folds.report("locomo_session_dev", "summarized, person_keywords chosen on the other folds",
                                  tuned).replace("\n", "\n  "))


# -- main ---------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--provider", choices=("rules", "llm"), default="rules")
    parser.add_argument("--config", help="config file (its summarizer section; needed for llm)")
    parser.add_argument("--skip-recall", action="store_true", help="only turn selection and timing")
    parser.add_argument("--no-raw", action="store_true", help="recall through summaries only (no raw store)")
    parser.add_argument("--person-keywords", default=str(PERSON_KEYWORDS), metavar="N1,N2,...",
                        help="keywords per speaker in the who-is-who line; several: one store each, and "
                             "each conversation scored with the value chosen on the others")
    parser.add_argument("--work", type=Path,
                        help="keep the stores and their rankings here (default: a temporary folder)")
    args = parser.parse_args()
    config = load_config(args.config)
    atom_rules, segmenter = AtomRules.load(config.atoms.rules_file), Segmenter(config.text)
    rules = RulesSummarizer(atom_rules, segmenter)
    data = sessions()
    if args.provider == "rules":
        print_selection(turn_selection(rules, data, config))
        t = timing(rules, data, config)
        print(f"## Time per session (rules, {len(data)} sessions, median {t['turns_median']:.0f} turns): "
              f"median {t['median_ms']:.1f} ms, p95 {t['p95_ms']:.1f} ms, max {t['max_ms']:.1f} ms")
        summarizers = {}
        for n in (int(v) for v in args.person_keywords.split(",")):
            candidate = RulesSummarizer(atom_rules, segmenter, person_keywords=n)
            summarizers[f"summarized person_keywords={n}" if "," in args.person_keywords else "summarized"] = \
                lambda turns, c=candidate: c.summarize(turns, config.summarizer)
    else:
        summarizers = {"summarized": llm_summarize(config, rules, data)}
    if not args.skip_recall:
        temp = None if args.work else tempfile.TemporaryDirectory()
        work = args.work or Path(temp.name)
        print_recall(recall_through_summaries(data, summarizers, work, raw=not args.no_raw))
        if temp is not None:
            temp.cleanup()


def llm_summarize(config: AppConfig, rules: RulesSummarizer, data: list[dict]):
    """The llm provider: turn selection by the turn each key fact shares most words with."""
    from shared.summarize.llm import LlmSummarizer, SummarizerError

    cache = {}

    def summarize(turns: list[Turn]):
        key = transcript(turns)
        if key not in cache:
            try:
                cache[key] = LlmSummarizer(config.summarizer).summarize(turns).trimmed()
            except SummarizerError as exc:
                print(f"llm failed ({exc}); rules used for this session", file=sys.stderr)
                cache[key] = rules.summarize(turns, config.summarizer)
        return cache[key]

    kept = []
    for session in data:
        turns = turns_of(session)
        evidence = evidence_of(session)
        sources = {_closest_turn(rules, fact, turns) for fact in summarize(turns).key_facts}
        kept += [(i in sources, t["dia_id"] in evidence) for i, t in enumerate(session["turns"])]
    m = prf(kept)
    print(f"## Turn selection, llm: P {m['p']:.3f} R {m['r']:.3f} F1 {m['f1']:.3f} kept {m['kept']:.0%}")
    return summarize


def _closest_turn(rules: RulesSummarizer, fact: str, turns: list[Turn]) -> int:
    words = set(rules.segmenter.terms(fact))
    overlap = [len(words & set(rules.segmenter.terms(t.text))) / (len(words) or 1) for t in turns]
    return max(range(len(turns)), key=lambda i: overlap[i])


if __name__ == "__main__":
    main()
