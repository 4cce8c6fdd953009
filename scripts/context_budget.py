#!/usr/bin/env python3
"""How much of its context neighbour a memory's embedding should take: dense R@5 on LoCoMo dev
for each budget (aokun_worker/handlers.py: EMBED_CONTEXT_TURNS, EMBED_CONTEXT_TOKENS), each
fold scored with the budget chosen on the other folds (scripts/folds.py).

Reads the memories and their neighbours from a store bench_recall.py ingested (--work), embeds
each memory as the worker would with each budget (0: no context), ranks every question's
group by cosine alone and scores R@5. Prints numbers; not a test. Embeds the whole set once
per budget (minutes each on 2 cores).

    .venv/bin/python scripts/bench_recall.py locomo_dev --work bench_out/locomo
    .venv/bin/python scripts/context_budget.py bench_out/locomo --budgets 0 16 32 64 160
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import folds  # noqa: E402  (scripts/folds.py)
from aokun_worker.handlers import EMBED_CONTEXT_TURNS, embedding_texts  # noqa: E402
from shared.config import load_config  # noqa: E402
from shared.embedders.local import E5Embedder  # noqa: E402
from shared.store import open_store  # noqa: E402

DATA = ROOT.parent / "shared" / "bench" / "data"
BATCH = 16


def recall_at_5(vectors: np.ndarray, groups: np.ndarray, names: list[str], questions: np.ndarray,
                queries: list[dict]) -> dict[str, float]:
    scores = {}
    for number, query in enumerate(queries):
        rows = np.where(groups == query["group"])[0]
        top = {names[rows[k]] for k in np.argsort(-(vectors[rows] @ questions[number]))[:5]}
        evidence = set(query["evidence"])
        scores[query["id"]] = len(evidence & top) / len(evidence)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work", type=Path, help="a bench_recall.py --work folder of locomo_dev")
    parser.add_argument("--budgets", type=int, nargs="+", default=[0, 16, 32, 64, 160])
    args = parser.parse_args()
    ids = {int(k): v for k, v in json.loads((args.work / "ids.json").read_text()).items()}
    store = open_store(load_config(args.work / "config.yaml").storage)
    order = sorted(ids)
    documents = store.documents.get_many(order)
    contexts = store.neighbours.texts_of(order)
    store.close()
    queries = [json.loads(line) for line in (DATA / "locomo_dev.queries.jsonl").open(encoding="utf-8")]
    embedder = E5Embedder(threads=0)
    questions = np.stack([embedder.embed_query(q["question"]) for q in queries])
    names, groups = [ids[i] for i in order], np.array([ids[i].split(":")[0] for i in order])
    candidates = {}
    for budget in args.budgets:
        texts = [embedding_texts(documents[i], contexts[i][:EMBED_CONTEXT_TURNS] if budget else [], budget or 1)[0]
                 for i in order]
        vectors = np.concatenate([embedder.embed_passages(texts[j:j + BATCH]) for j in range(0, len(texts), BATCH)])
        candidates[f"{budget} tokens"] = recall_at_5(vectors, groups, names, questions, queries)
        held = folds.held_out(folds.folds("locomo_dev", queries), {budget: candidates[f"{budget} tokens"]})
        print(f"context budget {budget:4d} tokens: dense R@5 per fold mean {held['mean']:.3f}", flush=True)
    held = folds.held_out(folds.folds("locomo_dev", queries), candidates)
    print(f"held out: {held['mean']:.3f} ± {held['spread']:.3f}; chosen per fold: "
          + ", ".join(f"{fold} {chosen}" for fold, (chosen, _) in held["folds"].items()))


if __name__ == "__main__":
    main()
