#!/usr/bin/env python3
"""How long a passage should be: the vector channel alone on LoCoMo at session level (one memory
per whole session), a memory scored by its best passage, R@5 per passage budget (estimated
tokens; shared/text/passages.py PASSAGE_TOKENS), each fold scored with the budget chosen on the
other folds (scripts/folds.py). Reads ../shared/bench/data; prints numbers, not a test. Embeds
every session once per budget (about three minutes each on 2 cores).

    .venv/bin/python scripts/passage_size.py --budgets 96 128 160 224 320
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
from shared.embedders.local import E5Embedder  # noqa: E402
from shared.text.passages import passages  # noqa: E402

DATA = ROOT.parent / "shared" / "bench" / "data"
DATASET = "locomo_session_dev"
BATCH = 64


def best_passages(sims: np.ndarray, owners: np.ndarray, allowed: np.ndarray, k: int) -> list[int]:
    """The k memories with the best passages, best first, among the allowed ones."""
    found: list[int] = []
    for row in np.argsort(-sims):
        memory = int(owners[row])
        if allowed[memory] and memory not in found:
            found.append(memory)
            if len(found) == k:
                break
    return found


def recall_at_5(embedder: E5Embedder, memories: list[dict], queries: list[dict], questions: np.ndarray,
                budget: int) -> dict[str, float]:
    cut = [(number, part.text) for number, memory in enumerate(memories)
           for part in passages(memory["content"], budget)]
    owners = np.array([number for number, _ in cut])
    texts = [text for _, text in cut]
    vectors = np.concatenate([embedder.embed_passages(texts[i:i + BATCH]) for i in range(0, len(texts), BATCH)])
    groups = np.array([m["group"] for m in memories])
    scores = {}
    for number, query in enumerate(queries):
        top = {memories[m]["id"] for m in best_passages(vectors @ questions[number], owners,
                                                         groups == query["group"], 5)}
        evidence = set(query["evidence"])
        scores[query["id"]] = len(evidence & top) / len(evidence)
    print(f"passage budget {budget:4d} tokens: {len(texts)} passages, R@5 {np.mean(list(scores.values())):.3f}",
          flush=True)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budgets", type=int, nargs="+", default=[96, 128, 160, 224, 320])
    args = parser.parse_args()
    memories = [json.loads(line) for line in (DATA / f"{DATASET}.memories.jsonl").open(encoding="utf-8")]
    queries = [json.loads(line) for line in (DATA / f"{DATASET}.queries.jsonl").open(encoding="utf-8")]
    embedder = E5Embedder(threads=0)
    questions = np.stack([embedder.embed_query(q["question"]) for q in queries])
    candidates = {f"{b} tokens": recall_at_5(embedder, memories, queries, questions, b) for b in args.budgets}
    held = folds.held_out(folds.folds(DATASET, queries), candidates)
    print(f"held out: {held['mean']:.3f} ± {held['spread']:.3f}; chosen per fold: "
          + ", ".join(f"{fold} {chosen}" for fold, (chosen, _) in held["folds"].items()))


if __name__ == "__main__":
    main()
