"""Folds for honest recall figures: every constant is chosen on folds it is then not scored on.

- locomo_dev: leave one conversation out (5 folds; a fold's queries are one conversation's).
- madial_zh_dev / madial_en_dev: two halves by dialogue number modulo 4 (q0, q1, q4, q5, ... in
  one half; q2, q3, q6, q7, ... in the other), so both halves hold both users' dialogues.
- any other set (e.g. deep_facts): one fold per group.

Pure functions over score.py's per-query scores; bench_recall.py uses them.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

Scores = Mapping[str, float]  # query id -> R@5 (or any per-query figure)


def fold_of(dataset: str, query: dict) -> str:
    """The fold a query belongs to."""
    if not dataset.startswith("madial"):
        return query["group"]
    number = int(query["id"].rsplit(":q", 1)[1])
    return "half-a" if number % 4 < 2 else "half-b"


def folds(dataset: str, queries: Sequence[dict]) -> dict[str, list[str]]:
    """{fold: [query ids]}, folds in a fixed order."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for query in queries:
        grouped[fold_of(dataset, query)].append(query["id"])
    return dict(sorted(grouped.items()))


def mean_over(ids: Sequence[str], scores: Scores) -> float:
    return sum(scores.get(i, 0.0) for i in ids) / len(ids) if ids else 0.0


def held_out(fold_ids: Mapping[str, list[str]], candidates: Mapping[str, Scores]) -> dict:
    """Choose a candidate on every fold's complement, score it on that fold.

    candidates: {label: per-query scores}. Returns {"folds": {fold: (chosen, held-out score)},
    "mean": mean of held-out scores, "spread": their population stdev, "min", "max"}; with one
    candidate this is simply the per-fold figure of that configuration."""
    result = {}
    for fold, ids in fold_ids.items():
        train = [i for other, members in fold_ids.items() if other != fold for i in members]
        chosen = max(candidates, key=lambda label: (mean_over(train, candidates[label]), _order(candidates, label)))
        result[fold] = (chosen, mean_over(ids, candidates[chosen]))
    values = [score for _, score in result.values()]
    return {"folds": result, "mean": statistics.fmean(values),
            "spread": statistics.pstdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values)}


def held_out_pooled(sets: Mapping[str, tuple[Mapping[str, list[str]], Mapping[str, Scores]]]) -> dict:
    """held_out over several datasets at once, for one default that must serve them all.

    sets: {dataset: (fold ids, {label: per-query scores})}, the same labels in each. A fold
    is scored with the label whose mean over its training queries is best: every query of the
    other folds of its own dataset and of all the other datasets, each query weighing the same
    (a half of an 80-question set must not outvote a thousand questions elsewhere). Returns
    {dataset: held_out-style outcome}."""
    labels = list(next(iter(sets.values()))[1])
    pooled = {label: {i: s for _, candidates in sets.values() for i, s in candidates[label].items()}
              for label in labels}
    every = [i for fold_ids, _ in sets.values() for ids in fold_ids.values() for i in ids]
    outcomes = {}
    for name, (fold_ids, candidates) in sets.items():
        result = {}
        for fold, ids in fold_ids.items():
            held = set(ids)
            train = [i for i in every if i not in held]
            chosen = max(labels, key=lambda label: (mean_over(train, pooled[label]), -labels.index(label)))
            result[fold] = (chosen, mean_over(ids, candidates[chosen]))
        values = [score for _, score in result.values()]
        outcomes[name] = {"folds": result, "mean": statistics.fmean(values),
                          "spread": statistics.pstdev(values) if len(values) > 1 else 0.0,
                          "min": min(values), "max": max(values)}
    return outcomes


def _order(candidates: Mapping[str, Scores], label: str) -> int:
    """Ties go to the candidate listed first (the default comes first)."""
    return -list(candidates).index(label)


def per_query(queries: Sequence[dict], rankings: Mapping[str, list[str]],
              score_one: Callable[[list[str], list[str]], dict], metric: str = "recall@5") -> dict[str, float]:
    """{query id: metric} with score.py's score_one."""
    return {q["id"]: score_one(rankings.get(q["id"], []), q["evidence"])[metric] for q in queries}


def report(dataset: str, label: str, outcome: dict) -> str:
    """One line per fold and the held-out mean with its spread."""
    lines = [f"{dataset} {label}: held-out R@5 {outcome['mean']:.3f} ± {outcome['spread']:.3f} "
             f"(min {outcome['min']:.3f}, max {outcome['max']:.3f})"]
    for fold, (chosen, value) in outcome["folds"].items():
        lines.append(f"  {fold:>10}: {value:.3f}  (chosen on the other folds: {chosen})")
    return "\n".join(lines)
