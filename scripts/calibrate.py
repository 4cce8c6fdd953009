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
EVERYDAY = "everyday_dev"  # ../shared/bench/everyday, loaded here (no --work store)
EVERYDAY_FACTS = 0.9  # share of its fact questions a floor must keep answered in the top 3
CHANNELS = ["bm25", "vector", "graph_keyword", "graph_vector"]
MIN_SCORES = [round(x, 3) for x in np.arange(0.0, 0.5, 0.005)]
MIN_ANSWERABLE = [round(x, 3) for x in np.arange(0.0, 1.0, 0.01)]
Floors = tuple  # (min_score, min_best_score, min_answerable)
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
    from shared.search.recall import RecallRequest
    from shared.store.model.documents import DocumentFilter

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
            rows.append(candidate_row(fusion, ids, dataset=dataset, query=query["id"], own=own,
                                      fold=f"{dataset}:{folds.fold_of(dataset, query)}",
                                      evidence=query["evidence"]))
        if n % 100 == 0:
            print(f"\r  {dataset}: {n}/{len(queries)} questions", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return rows


def candidate_row(fusion, names: dict[int, str], **row) -> dict:
    """One question asked in one persona: its candidates (fused score, label) and evidence."""
    from shared.search.fuse import normalise

    candidates = []
    if fusion is not None:
        fused = dict(normalise(fusion.fused()))
        for doc_id in fusion.documents:
            name = names.get(doc_id, "")
            candidates.append({"id": name, "fused": fused.get(doc_id, 0.0),
                               "label": int(row["own"] and name in row["evidence"])})
    return {**row, "strongest": fusion.strongest if fusion is not None else {}, "candidates": candidates,
            "unmentioned": fusion is not None and fusion.unmentioned}


def everyday_rows(local_model: str) -> list[dict]:
    """The everyday set as calibration rows: each user's fact, changed-fact and never-told
    questions asked in that user's store (own: the memories that answer are the positives; a
    never-told question has none) and in the other user's (foreign). A fold per user."""
    import tempfile

    import bench_everyday as everyday  # scripts/bench_everyday.py
    from shared.assembly import open_services
    from shared.search.recall import RecallRequest
    from shared.store.model.documents import DocumentFilter

    users = json.loads(everyday.DATASET.read_text(encoding="utf-8"))["users"]
    now = everyday.datetime.now(everyday.user_zone(everyday.config_of({}, Path(".")).memory.time_zone))
    rows = []
    with tempfile.TemporaryDirectory(prefix="aokun-calibrate-") as folder:
        services = open_services(everyday.config_of({"embedding.local_model": local_model}, Path(folder)),
                                 queued=False)
        try:
            names = {}
            for user, data in users.items():
                ids = everyday.load_user(services, data["memories"], now, persona=user)
                names.update({memory_id: f"{user}:{key}" for key, memory_id in ids.items()})
            for user, data in users.items():
                other = next(u for u in users if u != user)
                for n, q in enumerate(data["questions"]):
                    if q["kind"] not in ("fact", "update", "unknown"):
                        continue
                    evidence = [f"{user}:{key}" for key in (q["expect"] or [])][:1 if q["kind"] == "update" else None]
                    for persona, own in ((user, True), (other, False)):
                        fusion = services.recaller.current.candidates(
                            RecallRequest(q["question"], 10, DocumentFilter(persona_id=persona)))
                        rows.append(candidate_row(fusion, names, dataset=EVERYDAY, query=f"{user}:q{n}",
                                                  kind=q["kind"], own=own, fold=f"{EVERYDAY}:{user}",
                                                  evidence=evidence))
        finally:
            services.close()
    return rows


def candidates_of(work: Path, dataset: str, local_model: str) -> list[dict]:
    """dump()'s rows, kept beside the store and reused (delete the file after a re-ingest); the
    everyday set's, made now with the same embedder."""
    if dataset == EVERYDAY:
        return everyday_rows(local_model)
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
    questions = {name: np.asarray([row["strongest"].get(name, np.nan) for row in rows]) for name in CHANNELS}
    answerable = np.asarray([float(row["own"] and bool(row["evidence"])) for row in rows])
    return {"x": {k: np.asarray(v) for k, v in columns.items()}, "label": np.asarray(labels, float),
            "row": np.asarray(owners), "questions": questions, "answerable": answerable}


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
    for size in range(len(CHANNELS) + 1):  # no channel: the fusion alone (cosines unread)
        for channels in itertools.combinations(CHANNELS, size):
            names = ["fused", "place", *channels]
            x = np.column_stack([data["x"][n] for n in names])
            keep = mask & ~np.isnan(x).any(axis=1) & (data["x"]["place"] < np.log1p(FITTED_PLACES))
            w = logistic(x[keep], data["label"][keep])
            models.append({"channels": list(channels), "intercept": float(w[0]),
                           "weights": {n: float(v) for n, v in zip(names, w[1:])}})
    return {"fitted_on": DATASETS, "models": models, "answerable": fit_answerable(data, mask)}


def fit_answerable(data: dict, mask: np.ndarray) -> list[dict]:
    """calibration.answerable's models: per set of channels, P(the persona holds an answer)
    from the question's strongest evidence, fitted on the questions of the masked candidates."""
    asked = np.zeros(len(data["answerable"]), bool)
    asked[np.unique(data["row"][mask])] = True
    models = []
    for size in range(1, len(CHANNELS) + 1):
        for channels in itertools.combinations(CHANNELS, size):
            x = np.column_stack([data["questions"][n] for n in channels])
            keep = asked & ~np.isnan(x).any(axis=1)
            w = logistic(x[keep], data["answerable"][keep])
            models.append({"channels": list(channels), "intercept": float(w[0]),
                           "weights": {n: float(v) for n, v in zip(channels, w[1:])}})
    return models


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
        out.append({**row, "ranked": [{**c, "p": p[i]} for i, c in enumerate(row["ranked"])],
                    "answerable": calibration.answerable(best)})
    return out


# -- figures ---------------------------------------------------------------------------------

def recall_at_5(ranked_ids: list[str], evidence: list[str]) -> float:
    return len(set(ranked_ids[:5]) & set(evidence)) / len(evidence) if evidence else 0.0


def answer(row: dict, floors: Floors) -> list[dict]:
    """What recall returns for a row at (min_score, min_best_score, min_answerable)."""
    min_score, min_best, min_answerable = floors
    if not row["ranked"] or row["ranked"][0]["p"] < min_best or row["answerable"] < min_answerable:
        return []
    if row.get("unmentioned") and min_answerable > 0:  # recall's rule (shared/search/mentions.py)
        return []
    return [c for c in row["ranked"] if c["p"] >= min_score]


def r5(rows: list[dict], floors: Floors = (0.0, 0.0, 0.0)) -> float:
    """Mean R@5 over own questions at these floors."""
    values = [recall_at_5([c["id"] for c in answer(row, floors)], row["evidence"])
              for row in rows if row["own"] and row["evidence"]]
    return float(np.mean(values)) if values else 0.0


def facts_answered(rows: list[dict], floors: Floors) -> float:
    """The share of own fact questions answered by one of their memories in the top 3."""
    marks = [bool({c["id"] for c in answer(r, floors)[:3]} & set(r["evidence"]))
             for r in rows if r["own"] and r.get("kind") == "fact"]
    return float(np.mean(marks)) if marks else 0.0


def nothing_share(rows: list[dict], floors: Floors) -> float:
    return float(np.mean([not answer(r, floors) for r in rows])) if rows else float("nan")


def report_everyday(rows: list[dict], chosen: dict[str, tuple[float, float]]) -> None:
    """Per user (fold), at the floors chosen on the other folds."""
    for fold in sorted({r["fold"] for r in rows}):
        mine = [r for r in rows if r["fold"] == fold]
        floors = chosen[fold]
        known = [r["answerable"] for r in mine if r["own"] and r["kind"] != "unknown"]
        unknown = [r for r in mine if r["own"] and r["kind"] == "unknown"]
        foreign = [r for r in mine if not r["own"]]
        print(f"{fold}: AUROC answerable, answered vs never-told"
              f" {auroc(known, [r['answerable'] for r in unknown]):.3f},"
              f" vs foreign {auroc(known, [r['answerable'] for r in foreign]):.3f}; at {floors[0]:.3f}/{floors[2]:.2f}:"
              f" facts in the top 3 {facts_answered(mine, floors):.2f}, never-told answered with nothing"
              f" {nothing_share(unknown, floors):.2f}, foreign {nothing_share(foreign, floors):.2f}")


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


def choose_floors(rows: list[dict]) -> Floors:
    """(min_score, min_best_score, min_answerable) costing at most MAX_R5_LOSS of R@5 on each
    benchmark in these rows, and keeping the everyday facts answered in the top 3 (at least
    EVERYDAY_FACTS of them, or as many as without floors): the question-level floor first (the
    highest that fits: it is what answers a question the store cannot answer with nothing),
    then the highest per-result floor that still fits. min_best_score stays off. Rows of several
    embedding spaces ("space") must fit in each."""
    spaces = {r.get("space") for r in rows}
    sets = [[r for r in rows if r["dataset"] == d and r.get("space") == e] for d in DATASETS for e in spaces]
    sets = [(s, r5(s)) for s in sets if s]
    days = [[r for r in rows if r["dataset"] == EVERYDAY and r.get("space") == e] for e in spaces]
    days = [(s, min(EVERYDAY_FACTS, facts_answered(s, (0.0, 0.0, 0.0)))) for s in days if s]

    def fits(floors):
        return all(base - r5(s, floors) <= MAX_R5_LOSS for s, base in sets) and \
            all(facts_answered(s, floors) >= facts for s, facts in days)

    answerable = max(m for m in MIN_ANSWERABLE if fits((0.0, 0.0, m)))
    return max(m for m in MIN_SCORES if fits((m, 0.0, answerable))), 0.0, answerable


def held_out(rows: list[dict], data: dict, fixed: Floors | None = None) -> tuple[list[dict], dict[str, Floors]]:
    """Every fold scored by models fitted on all the others; {fold: the floors chosen there, or
    the fixed ones}."""
    predicted, chosen = [], {}
    fold_of_row = np.asarray([r["fold"] for r in rows])[data["row"]]
    for fold in sorted({r["fold"] for r in rows}):
        train = fold_of_row != fold
        model = fit_all(data, train)
        chosen[fold] = fixed or choose_floors(scored(rows, data, train, model))
        predicted += scored(rows, data, ~train, model)
    return predicted, chosen


def report(predicted: list[dict], chosen: dict[str, tuple[float, float]]) -> None:
    table, ece = reliability(predicted)
    print("reliability (held-out folds, top-10 results of own and foreign questions):")
    print("  score bin    results  mean score  share relevant")
    for low, high, n, mean_p, share in table:
        print(f"  {low:.1f}-{high:.1f}   {n:>8}  {mean_p:>10.3f}  {share:>14.3f}")
    print(f"  expected calibration error {ece:.3f}")
    report_everyday([r for r in predicted if r["dataset"] == EVERYDAY], chosen)
    for dataset in DATASETS:
        rows = [r for r in predicted if r["dataset"] == dataset]
        if not rows:
            continue
        own = [top(r) for r in rows if r["own"]]
        foreign = [top(r) for r in rows if not r["own"]]
        own_answerable = [r["answerable"] for r in rows if r["own"]]
        foreign_answerable = [r["answerable"] for r in rows if not r["own"]]
        by_fold = {}
        for row in rows:
            by_fold.setdefault(row["fold"], []).append(row)
        at_min = np.mean([r5(fold_rows, chosen[f]) for f, fold_rows in by_fold.items()])
        empty = np.mean([np.mean([not answer(r, chosen[f]) for r in fold_rows if not r["own"]])
                         for f, fold_rows in by_fold.items()])
        own_empty = np.mean([np.mean([not answer(r, chosen[f]) for r in fold_rows if r["own"]])
                             for f, fold_rows in by_fold.items()])
        floors = ", ".join(f"{chosen[f][0]:.3f}/{chosen[f][2]:.2f}" for f in by_fold)
        print(f"{dataset}: R@5 {np.mean([r5(v) for v in by_fold.values()]):.3f} with no floor;"
              f" AUROC own vs foreign: top score {auroc(own, foreign):.3f},"
              f" answerable {auroc(own_answerable, foreign_answerable):.3f};"
              f" at min_score/min_answerable chosen on the other folds ({floors}):"
              f" R@5 {at_min:.3f}, answered with nothing: foreign questions {empty:.2f},"
              f" own {own_empty:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="folder of bench_recall --work stores")
    parser.add_argument("--datasets", nargs="+", default=[*DATASETS, EVERYDAY])
    parser.add_argument("--write", action="store_true", help="fit on everything and write the resource")
    parser.add_argument("--pool", type=Path, nargs="+", metavar="WORK",
                        help="instead: the default floors for every space at once, each fitted on "
                             "everything in its folder of stores (one folder per embedding model)")
    parser.add_argument("--fixed", type=float, nargs=2, metavar=("MIN_SCORE", "MIN_ANSWERABLE"),
                        help="report every fold at these floors instead of floors chosen on the others")
    args = parser.parse_args()
    if args.pool:
        pooled_floors(args.pool, args.datasets)
        return
    bench = [d for d in args.datasets if d != EVERYDAY]
    space, local_model = embedding_of(args.work / (bench[0] if bench else DATASETS[0]))
    print(f"embedding space: {space}")
    rows = [row for dataset in args.datasets for row in candidates_of(args.work, dataset, local_model)]
    data = table(rows)
    predicted, chosen = held_out(rows, data, (args.fixed[0], 0.0, args.fixed[1]) if args.fixed else None)
    report(predicted, chosen)
    if args.write:
        everything = np.ones(len(data["label"]), bool)
        model = fit_all(data, everything)
        model["fitted_on"] = args.datasets
        model["min_score"], _, model["min_answerable"] = choose_floors(scored(rows, data, everything, model))
        write_space(space, model)
        print(f"wrote the {space} space of shared/resources/score_calibration.json (on everything: "
              f"min_score {model['min_score']}, min_answerable {model['min_answerable']})")


def pooled_floors(works: list[Path], datasets: list[str]) -> None:
    """retrieval.min_score and min_answerable for every embedding space at once: the config has
    one of each. Held-out figures at these floors: run the report with --fixed (below)."""
    rows = []
    for work in works:
        bench = [d for d in datasets if d != EVERYDAY]
        space, local_model = embedding_of(work / (bench[0] if bench else DATASETS[0]))
        found = [row for dataset in datasets for row in candidates_of(work, dataset, local_model)]
        data = table(found)
        everything = np.ones(len(data["label"]), bool)
        scored_rows = scored(found, data, everything, fit_all(data, everything))
        print(f"{space}: alone {choose_floors(scored_rows)}")
        rows += [dict(row, space=space) for row in scored_rows]
    min_score, _, min_answerable = choose_floors(rows)
    print(f"every space: min_score {min_score}, min_answerable {min_answerable}")


def embedding_of(store_dir: Path) -> tuple[str, str]:
    """(the embedding model of a bench store's vectors, its embedding.local_model setting)."""
    from shared.assembly import open_services
    from shared.config import load_config

    services = open_services(load_config(store_dir / "config.yaml"), queued=False)
    try:
        return services.embedder.model, services.live.at_start.embedding.local_model
    finally:
        services.close()


def write_space(space: str, model: dict) -> None:
    """Put one embedding model's fit into the resource, keeping the other spaces'."""
    from shared.search.calibration import RESOURCE

    out = ROOT / "shared" / "resources" / RESOURCE
    raw = json.loads(out.read_text(encoding="utf-8"))
    if "spaces" not in raw:
        raw = {"spaces": {}}
    raw["spaces"][space] = model
    raw.setdefault("default_space", space)
    raw["embedder_channels"] = ["vector", "graph_vector"]
    out.write_text(json.dumps(raw, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
