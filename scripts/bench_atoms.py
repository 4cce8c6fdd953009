#!/usr/bin/env python3
"""Atom types and plan deadlines on everyday sentences, held out.

The labelled set is scripts/data/atom_labels.jsonl, one sentence a line: {id, lang, type,
deadline?} with either its own text and anchor (when it was said), or a reference into the dev
benchmarks ({dataset, memory, sentence}: the memory's text is read from ../shared/bench at run
time, never copied; its time is the anchor). Each sentence becomes a memory of its own, drafted
into atoms by shared.extract.atomize.draft_atoms; its first atom's type and, for a plan, the date
of its deadline are compared with the label.

The rules' free constants (atom_rules.yaml "weights") are chosen on four folds and scored on
the fifth, for each of five folds (stable by id; scripts/folds.py). Printed: held-out accuracy
of the type overall, per type and per language, and of plan deadlines (right date), with the
constants each fold chose. Rules without free constants are scored as they are.

    .venv/bin/python scripts/bench_atoms.py
    .venv/bin/python scripts/bench_atoms.py --bench ../shared/bench --folds 5
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import folds  # noqa: E402
from shared.config import AtomsConfig  # noqa: E402
from shared.extract.atomize import AtomRules, draft_atoms  # noqa: E402
from shared.store.model.documents import Document, MemoryFields  # noqa: E402

LABELS = ROOT / "scripts" / "data" / "atom_labels.jsonl"
# The benchmark sentences are numbered by this splitter, fixed here so that a change to the
# code under test never moves a label onto another sentence.
_REFERENCE_SPLIT = re.compile(r"(?<=[。！？!?；;])|(?<=[.])\s+")
_TIME_MARKER = re.compile(r"^\s*\[[^\]]*\]\s*")
# Candidate values of the free constants (RuleWeights fields).
GRID = {"future_time": (0.6, 1.2, 1.8), "plan_with_time": (1.0, 2.0, 3.0),
        "descriptive": (0.0, 0.4), "min_descriptive_words": (2, 3, 4, 5)}


def benchmark_sentence(memories: dict[str, dict], label: dict) -> tuple[str, datetime]:
    """The labelled sentence of a benchmark memory, and the memory's time."""
    memory = memories[label["memory"]]
    text = _TIME_MARKER.sub("", memory["content"])
    if memory.get("speaker"):
        text = text.split(":", 1)[1]
    said = [s.strip() for s in _REFERENCE_SPLIT.split(text) if s and s.strip()]
    return said[label["sentence"]], datetime.fromisoformat(memory["time"])


def read_labels(path: Path, bench: Path) -> list[dict]:
    labels = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    memories: dict[str, dict[str, dict]] = {}
    for label in labels:
        if "dataset" in label:
            if label["dataset"] not in memories:
                rows = (bench / "data" / f"{label['dataset']}.memories.jsonl").read_text(encoding="utf-8")
                memories[label["dataset"]] = {r["id"]: r for r in map(json.loads, rows.splitlines())}
            label["text"], anchor = benchmark_sentence(memories[label["dataset"]], label)
        else:
            anchor = datetime.fromisoformat(label["anchor"])
        label["when"] = anchor
    return labels


def fold_of(label_id: str, count: int) -> str:
    return f"fold-{int(hashlib.sha1(label_id.encode()).hexdigest(), 16) % count}"


def predict(rules: AtomRules, label: dict, config: AtomsConfig) -> tuple[str, str | None]:
    """(type, deadline date) of the sentence's first atom."""
    doc = Document(0, label["text"], "", MemoryFields(original_time=label["when"]), False, 0, None, 0.0, 0.0)
    drafts = draft_atoms(doc, rules, config)
    if not drafts:
        return "(no atom)", None
    due = drafts[0].deadline
    return drafts[0].type, datetime.fromtimestamp(due, timezone.utc).date().isoformat() if due else None


def item_score(label: dict, got: tuple[str, str | None]) -> float:
    """The type right, and for a plan with a labelled date the date right too (mean of the two)."""
    checks = [got[0] == label["type"]]
    if label.get("deadline"):
        checks.append(got[1] == label["deadline"])
    return sum(checks) / len(checks)


def candidates(rules: AtomRules) -> dict[str, AtomRules]:
    """{label: rules} over the grid of free constants; the rules as they are when they have none."""
    if not hasattr(rules, "with_weights"):
        return {"as is": rules}
    weights_type = type(rules.weights)
    found = {}
    for values in itertools.product(*GRID.values()):
        chosen = dict(zip(GRID, values))
        found[" ".join(f"{k}={v}" for k, v in chosen.items())] = rules.with_weights(weights_type(**chosen))
    return found


def report(labels: list[dict], predictions: dict[str, tuple[str, str | None]]) -> None:
    def line(name: str, items: list[dict]) -> None:
        right = sum(predictions[x["id"]][0] == x["type"] for x in items)
        print(f"  {name:<12} {right:>3}/{len(items):<3} {right / len(items):.3f}" if items else f"  {name:<12} -")

    print("type accuracy (held out)")
    line("all", labels)
    for lang in sorted({x["lang"] for x in labels}):
        line(lang, [x for x in labels if x["lang"] == lang])
    for atom_type in sorted({x["type"] for x in labels}):
        line(atom_type, [x for x in labels if x["type"] == atom_type])
    dated = [x for x in labels if x.get("deadline")]
    right = sum(predictions[x["id"]][1] == x["deadline"] for x in dated)
    print(f"plan deadlines (right date, held out): {right}/{len(dated)} {right / max(1, len(dated)):.3f}")
    for lang in sorted({x["lang"] for x in dated}):
        subset = [x for x in dated if x["lang"] == lang]
        ok = sum(predictions[x["id"]][1] == x["deadline"] for x in subset)
        print(f"  {lang:<12} {ok:>3}/{len(subset):<3} {ok / len(subset):.3f}")
    confusion = Counter((x["type"], predictions[x["id"]][0]) for x in labels if predictions[x["id"]][0] != x["type"])
    print("most frequent confusions (label -> got):",
          ", ".join(f"{a}->{b} {n}" for (a, b), n in confusion.most_common(8)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()

    labels = read_labels(args.labels, args.bench)
    counts = Counter((x["lang"], x["type"]) for x in labels)
    print(f"{len(labels)} labelled sentences:", ", ".join(f"{lang}/{t} {n}" for (lang, t), n in sorted(counts.items())))
    config, rules = AtomsConfig(), AtomRules.load()
    options = candidates(rules)
    predicted = {name: {x["id"]: predict(r, x, config) for x in labels} for name, r in options.items()}
    scores = {name: {x["id"]: item_score(x, got[x["id"]]) for x in labels} for name, got in predicted.items()}
    fold_ids: dict[str, list[str]] = {}
    for x in labels:
        fold_ids.setdefault(fold_of(x["id"], args.folds), []).append(x["id"])
    result = folds.held_out(dict(sorted(fold_ids.items())), scores)
    held = {}
    for fold, (chosen, score) in result["folds"].items():
        print(f"{fold}: {len(fold_ids[fold])} sentences, score {score:.3f}, chose {chosen}")
        held.update({i: predicted[chosen][i] for i in fold_ids[fold]})
    print(f"held-out score (type, and date for dated plans): mean {result['mean']:.3f} "
          f"spread {result['spread']:.3f}")
    report(labels, held)


if __name__ == "__main__":
    main()
