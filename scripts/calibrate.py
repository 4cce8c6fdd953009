#!/usr/bin/env python3
"""Fit recall's score calibration (shared/search/calibration.py) on the dev benchmarks' folds
and report how well it holds on the folds it was not fitted on.

Needs stores ingested by scripts/bench_recall.py --work DIR/DATASET (one per dataset). Every
question is recalled twice, in-process through the real Recaller: in its own conversation's
persona (its annotated evidence memories are positives, the other candidates negatives) and
in another conversation's persona (every candidate a negative). Each candidate keeps every
channel's evidence.

    .venv/bin/python scripts/calibrate.py --work bench_out           # report only
    .venv/bin/python scripts/calibrate.py --work bench_out --write   # and write the resource

Folds: LoCoMo's conversations, MADial's halves (scripts/folds.py); all three datasets pooled,
each fold predicted by models fitted on every other fold. Reported on held-out predictions:
a reliability table and the expected calibration error, the AUROC of the top score for own
against foreign questions, R@5 ordered by probability against today's fused order, and at the
min_score and min_best_score chosen on the other folds: R@5 and the share of foreign (and own)
questions answered with nothing. --write fits on everything and writes shared/resources/score_calibration.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
import folds  # noqa: E402  (scripts/folds.py)

BENCH = ROOT.parent / "shared" / "bench"
DATASETS = ["locomo_dev", "madial_zh_dev", "madial_en_dev"]
CHANNELS = ["bm25", "vector", "graph_keyword", "graph_vector"]
MIN_SCORES = [round(x, 3) for x in np.arange(0.0, 0.5, 0.005)]
MAX_R5_LOSS = 0.02
L2 = 1e-3
FITTED_PLACES = 30  # candidates past the 30th of a query are never shown (k <= 15)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


# -- candidates ------------------------------------------------------------------------------

def dump(work: Path, dataset: str) -> list[dict]:
    """One row per (question, persona asked in): its candidates' evidence and labels."""
    from aokun_server.app import build_front
    from shared.config import load_config
    from shared.search.fuse import normalise
    from shared.search.recall import RecallRequest
    from shared.store.documents import DocumentFilter

    store_dir = work / dataset
    ids = {int(k): v for k, v in json.loads((store_dir / "ids.json").read_text()).items()}
    front = build_front(load_config(store_dir / "config.yaml"))
    queries = read_jsonl(BENCH / "data" / f"{dataset}.queries.jsonl")
    groups = sorted({q["group"] for q in queries})
    rows = []
    for n, query in enumerate(queries):
        foreign = groups[(groups.index(query["group"]) + 1) % len(groups)]
        for persona, own in ((query["group"], True), (foreign, False)):
            fusion = front.recaller.current.candidates(
                RecallRequest(query["question"], 10, DocumentFilter(persona_id=persona)))
            candidates = []
            if fusion is not None:
                fused = dict(normalise(fusion.fused()))
                for doc_id in fusion.documents:
                    bench_id = ids.get(doc_id, "")
                    candidates.append({"id": bench_id, "fused": fused.get(doc_id, 0.0),
                                       "label": int(own and bench_id in query["evidence"])})
            rows.append({"dataset": dataset, "query": query["id"], "own": own,
                         "strongest": fusion.strongest if fusion is not None else {},
                         "fold": f"{dataset}:{folds.fold_of(dataset, query)}",
                         "evidence": query["evidence"], "candidates": candidates})
        if n % 100 == 0:
            print(f"\r  {dataset}: {n}/{len(queries)} questions", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return rows


def candidates_of(work: Path, dataset: str) -> list[dict]:
    """dump()'s rows, kept beside the store and reused (delete the file after a re-ingest)."""
    cache = work / dataset / "calibration-candidates.jsonl"
    if cache.exists():
        return read_jsonl(cache)
    rows = dump(work, dataset)
    cache.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


# -- the model -------------------------------------------------------------------------------

def table(rows: list[dict]) -> dict:
    """Every candidate of every row as model inputs: {"x": {input: column}, "label", "row"},
    candidates in fused order (the order recall returns them in)."""
    from shared.search.calibration import inputs

    columns: dict[str, list[float]] = {}
    labels, owners = [], []
    for n, row in enumerate(rows):
        ranked = sorted(row["candidates"], key=lambda c: -c["fused"])
        top = max((c["fused"] for c in ranked), default=1.0) or 1.0
        best = row["strongest"]
        for place, c in enumerate(ranked):
            values = inputs(c["fused"] / top, place, best)
            for name in ["fused", "place", *CHANNELS]:
                columns.setdefault(name, []).append(values.get(name, float("nan")))
            labels.append(c["label"])
            owners.append(n)
        row["ranked"] = ranked
    return {"x": {k: np.asarray(v) for k, v in columns.items()}, "label": np.asarray(labels, float),
            "row": np.asarray(owners)}


def logistic(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Weights (intercept first) by Newton's method with a little L2."""
    x = np.c_[np.ones(len(x)), x]
    w = np.zeros(x.shape[1])
    penalty = L2 * len(y) * np.diag(np.r_[0, np.ones(len(w) - 1)])
    for _ in range(60):
        p = 1 / (1 + np.exp(-np.clip(x @ w, -40, 40)))
        step = np.linalg.solve((x * (p * (1 - p))[:, None]).T @ x + penalty + 1e-9 * np.eye(len(w)),
                               x.T @ (p - y) + penalty @ w)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def fit_all(data: dict, mask: np.ndarray) -> dict:
    """A model for every set of channels that may answer a query (retrieval.channels may
    switch any off), each fitted on the masked candidates of the queries."""
    models = []
    for size in range(1, len(CHANNELS) + 1):
        for channels in itertools.combinations(CHANNELS, size):
            names = ["fused", "place", *channels]
            x = np.column_stack([data["x"][n] for n in names])
            keep = mask & ~np.isnan(x).any(axis=1) & (data["x"]["place"] < np.log1p(FITTED_PLACES))
            w = logistic(x[keep], data["label"][keep])
            models.append({"channels": list(channels), "intercept": float(w[0]),
                           "weights": {n: float(v) for n, v in zip(names, w[1:])}})
    return {"fitted_on": DATASETS, "models": models}


def scored(rows: list[dict], data: dict, mask: np.ndarray, raw: dict) -> list[dict]:
    """The masked rows, each candidate with its probability, in fused order."""
    from shared.search.calibration import Calibration

    calibration = Calibration.from_dict(raw)
    out = []
    for n in sorted(set(data["row"][mask].tolist())):
        row = rows[n]
        top = max((c["fused"] for c in row["ranked"]), default=1.0) or 1.0
        best = row["strongest"]
        p = calibration.probabilities([(i, c["fused"] / top) for i, c in enumerate(row["ranked"])], best)
        out.append({**row, "ranked": [{**c, "p": p[i]} for i, c in enumerate(row["ranked"])]})
    return out


# -- figures ---------------------------------------------------------------------------------

def recall_at_5(ranked_ids: list[str], evidence: list[str]) -> float:
    return len(set(ranked_ids[:5]) & set(evidence)) / len(evidence) if evidence else 0.0


def answer(row: dict, floors: tuple[float, float]) -> list[dict]:
    """What recall returns for a row at (min_score, min_best_score)."""
    min_score, min_best = floors
    if not row["ranked"] or row["ranked"][0]["p"] < min_best:
        return []
    return [c for c in row["ranked"] if c["p"] >= min_score]


def r5(rows: list[dict], floors: tuple[float, float] = (0.0, 0.0)) -> float:
    """Mean R@5 over own questions at these floors."""
    values = [recall_at_5([c["id"] for c in answer(row, floors)], row["evidence"])
              for row in rows if row["own"] and row["evidence"]]
    return float(np.mean(values)) if values else 0.0


def top(row: dict) -> float:
    return row["ranked"][0]["p"] if row["ranked"] else 0.0


def auroc(positives: list[float], negatives: list[float]) -> float:
    """P(a random positive outscores a random negative), ties counting half."""
    pos, neg = np.asarray(positives), np.asarray(negatives)
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def reliability(rows: list[dict], bins: int = 10) -> tuple[list[tuple], float]:
    """(bin low, bin high, results, mean score, share relevant) per bin over the top-10 results
    of every question, and the expected calibration error."""
    pairs = [(c["p"], c["label"]) for row in rows for c in row["ranked"][:10]]
    table, ece = [], 0.0
    for b in range(bins):
        low, high = b / bins, (b + 1) / bins
        inside = [(p, y) for p, y in pairs if low <= p < high or (b == bins - 1 and p == 1.0)]
        if not inside:
            continue
        mean_p = float(np.mean([p for p, _ in inside]))
        share = float(np.mean([y for _, y in inside]))
        table.append((low, high, len(inside), mean_p, share))
        ece += len(inside) / len(pairs) * abs(mean_p - share)
    return table, ece


def choose_floors(rows: list[dict]) -> tuple[float, float]:
    """(min_score, min_best_score) costing at most MAX_R5_LOSS of R@5 on each dataset in these
    rows together: the answer-level floor first (the highest that fits: it is what answers a
    foreign question with nothing), then the highest per-result floor that still fits."""
    sets = [[r for r in rows if r["dataset"] == d] for d in DATASETS]
    sets = [(s, r5(s)) for s in sets if s]

    def fits(floors):
        return all(base - r5(s, floors) <= MAX_R5_LOSS for s, base in sets)

    best = max(m for m in MIN_SCORES if fits((0.0, m)))
    return max(m for m in MIN_SCORES if m <= best and fits((m, best))), best


def held_out(rows: list[dict], data: dict) -> tuple[list[dict], dict[str, tuple[float, float]]]:
    """Every fold scored by models fitted on all the others; {fold: floors chosen there}."""
    predicted, chosen = [], {}
    fold_of_row = np.asarray([r["fold"] for r in rows])[data["row"]]
    for fold in sorted({r["fold"] for r in rows}):
        train = fold_of_row != fold
        model = fit_all(data, train)
        chosen[fold] = choose_floors(scored(rows, data, train, model))
        predicted += scored(rows, data, ~train, model)
    return predicted, chosen


def report(predicted: list[dict], chosen: dict[str, tuple[float, float]]) -> None:
    table, ece = reliability(predicted)
    print("reliability (held-out folds, top-10 results of own and foreign questions):")
    print("  score bin    results  mean score  share relevant")
    for low, high, n, mean_p, share in table:
        print(f"  {low:.1f}-{high:.1f}   {n:>8}  {mean_p:>10.3f}  {share:>14.3f}")
    print(f"  expected calibration error {ece:.3f}")
    for dataset in DATASETS:
        rows = [r for r in predicted if r["dataset"] == dataset]
        if not rows:
            continue
        own = [top(r) for r in rows if r["own"]]
        foreign = [top(r) for r in rows if not r["own"]]
        by_fold = {}
        for row in rows:
            by_fold.setdefault(row["fold"], []).append(row)
        at_min = np.mean([r5(fold_rows, chosen[f]) for f, fold_rows in by_fold.items()])
        empty = np.mean([np.mean([not answer(r, chosen[f]) for r in fold_rows if not r["own"]])
                         for f, fold_rows in by_fold.items()])
        own_empty = np.mean([np.mean([not answer(r, chosen[f]) for r in fold_rows if r["own"]])
                             for f, fold_rows in by_fold.items()])
        floors = ", ".join(f"{chosen[f][0]:.3f}/{chosen[f][1]:.3f}" for f in by_fold)
        print(f"{dataset}: R@5 {np.mean([r5(v) for v in by_fold.values()]):.3f} with no floor;"
              f" AUROC top score own vs foreign {auroc(own, foreign):.3f};"
              f" at min_score/min_best_score chosen on the other folds ({floors}):"
              f" R@5 {at_min:.3f}, answered with nothing: foreign questions {empty:.2f},"
              f" own {own_empty:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="folder of bench_recall --work stores")
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--write", action="store_true", help="fit on everything and write the resource")
    args = parser.parse_args()
    rows = [row for dataset in args.datasets for row in candidates_of(args.work, dataset)]
    data = table(rows)
    predicted, chosen = held_out(rows, data)
    report(predicted, chosen)
    if args.write:
        everything = np.ones(len(data["label"]), bool)
        model = fit_all(data, everything)
        model["fitted_on"] = args.datasets
        model["min_score"], model["min_best_score"] = choose_floors(scored(rows, data, everything, model))
        out = ROOT / "shared" / "resources" / "score_calibration.json"
        out.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out} (on everything: min_score {model['min_score']}, "
              f"min_best_score {model['min_best_score']})")


if __name__ == "__main__":
    main()
