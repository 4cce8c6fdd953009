#!/usr/bin/env python3
"""What the rules of the atoms and graph stages cost per memory (no embedding, no store).

Times draft_atoms and GraphBuilder.build on the memories of a dev benchmark in
../shared/bench (LoCoMo turns, MADial memories), after a warm-up that loads jieba and the
gazetteer. Run it from two checkouts to compare code (the machine is shared: compare in one
session, as a ratio):

    .venv/bin/python scripts/bench_extract.py [--data locomo_dev madial_zh_dev] [--limit 1000]
    .venv/bin/python scripts/bench_extract.py --repo /tmp/old-checkout   # the same on older code
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT.parent / "shared" / "bench" / "data"


def documents(name: str, limit: int):
    from shared.store.model.documents import Document, MemoryFields

    out = []
    with open(BENCH / f"{name}.memories.jsonl", encoding="utf-8") as rows:
        for number, line in enumerate(rows):
            if number >= limit:
                break
            row = json.loads(line)
            when = datetime.fromisoformat(row["time"]) if row.get("time") else None
            fields = MemoryFields(participants=tuple(row.get("participants") or ()), persona_id=row["group"],
                                  original_time=when)
            out.append(Document(number, row["content"], "h", fields, False, 0, None, time.time(), time.time()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=["locomo_dev", "madial_zh_dev", "madial_en_dev"])
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose code to time")
    args = parser.parse_args()
    sys.path.insert(0, str(args.repo))
    from shared.config import AtomsConfig, GraphConfig, TextConfig
    from shared.extract.atomize import AtomRules, draft_atoms, speaker_of
    from shared.extract.graph_rules import GraphBuilder, StoredFact
    from shared.text.segment import Segmenter

    segmenter, rules, config = Segmenter(TextConfig()), AtomRules.load(), AtomsConfig()
    builder = GraphBuilder(segmenter, GraphConfig())
    for name in args.data:
        docs = documents(name, args.limit)
        warm = docs[:20]
        for doc in warm:
            builder.build(doc, speaker_of(doc), [StoredFact(1, d.text, d.confidence)
                                                 for d in draft_atoms(doc, rules, config)])
        atoms_ms, graph_ms = [], []
        for doc in docs:
            start = time.perf_counter()
            drafts = draft_atoms(doc, rules, config)
            middle = time.perf_counter()
            builder.build(doc, speaker_of(doc),
                          [StoredFact(i, d.text, d.confidence, d.subject) for i, d in enumerate(drafts)])
            atoms_ms.append((middle - start) * 1000)
            graph_ms.append((time.perf_counter() - middle) * 1000)
        print(f"{name} ({len(docs)} memories, code at {args.repo}): atoms {statistics.mean(atoms_ms):.2f} ms"
              f" a memory (p95 {statistics.quantiles(atoms_ms, n=20)[-1]:.2f}), graph rules"
              f" {statistics.mean(graph_ms):.2f} ms (p95 {statistics.quantiles(graph_ms, n=20)[-1]:.2f})")


if __name__ == "__main__":
    main()
