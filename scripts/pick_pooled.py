#!/usr/bin/env python3
"""One default for every dataset, chosen honestly: the held-out figure of a pooled choice.

After `bench_recall.py DATASET --work DIR --tune SECTION.KEY=V1,V2,...` has run on each dataset
(same key, same values), this reads the rankings files it left and reports, per dataset, each
fold scored with the value that is best on everything else: the other folds of its own dataset
and all of the other datasets, each query weighing the same (scripts/folds.py,
held_out_pooled).

    .venv/bin/python scripts/pick_pooled.py retrieval.graph_route_weight 0.35,0.2,0.1,0.0 \\
        locomo_dev=bench_out/locomo madial_zh_dev=bench_out/zh madial_en_dev=bench_out/en
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import folds
from bench_recall import BENCH, CHANNELS, read_jsonl


def rankings_file(work: Path, channels: list[str], label: str) -> Path:
    # The name bench_recall.py gives a --tune candidate's rankings.
    return work / f"rankings-{'+'.join(channels)}-{label.replace('=', '_').replace('/', '_')}.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("key", help="SECTION.KEY that was tuned")
    parser.add_argument("values", help="V1,V2,... as given to --tune")
    parser.add_argument("sets", nargs="+", metavar="DATASET=WORKDIR")
    parser.add_argument("--channels", nargs="+", default=CHANNELS)
    args = parser.parse_args()
    sys.path.insert(0, str(BENCH))
    import score  # ../shared/bench/score.py (stdlib only)

    sets = {}
    for item in args.sets:
        dataset, work = item.split("=", 1)
        queries = read_jsonl(BENCH / "data" / f"{dataset}.queries.jsonl")
        candidates = {}
        for value in args.values.split(","):
            label = f"{args.key}={value}"
            ranked = {r["id"]: r["ranked"] for r in read_jsonl(rankings_file(Path(work), args.channels, label))}
            candidates[label] = folds.per_query(queries, ranked, score.score_one)
        sets[dataset] = (folds.folds(dataset, queries), candidates)
    for dataset, outcome in folds.held_out_pooled(sets).items():
        print(folds.report(dataset, f"{args.key} chosen on everything else", outcome))
    print(json.dumps({d: {label: round(folds.mean_over([i for ids in f.values() for i in ids], s), 4)
                          for label, s in c.items()} for d, (f, c) in sets.items()}))


if __name__ == "__main__":
    main()
