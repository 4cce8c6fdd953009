#!/usr/bin/env python3
"""A benchmark of facts placed deep inside long memories, asked for by meaning alone.

The local embedder reads only a memory's first 512 tokens, so a fact written late in a long
memory is invisible to the vector channel; this set measures how much of it recall still finds.
scripts/data/deep_facts.jsonl holds hand-written items {id, lang, fact, question}, English and
Chinese, whose question shares no rare term with its fact (checked here: only meaning links
them, so BM25 cannot stand in for the embedder).

Each fact is set inside filler read at run time from ../shared/bench/data (it stays out of
this repository): English filler is consecutive LoCoMo session text
(locomo_session_dev.memories.jsonl, without the [time] prefix), Chinese filler the MADial
(zh) memories run together. The fact comes after 3,000-6,000 characters of English filler or
1,500-3,000 of Chinese, and more filler follows it; as many memories again are filler alone.
The output is a folder in ../shared/bench's format (NAME.memories.jsonl, NAME.queries.jsonl):
group and category are the language, so retrieval stays within one language.

    .venv/bin/python scripts/deep_facts.py                       # -> bench_out/deep_facts/
    .venv/bin/python scripts/deep_facts.py /tmp/deep --seed 7
    .venv/bin/python scripts/deep_facts.py --check               # only check the items
    .venv/bin/python scripts/bench_recall.py --data bench_out/deep_facts deep_facts
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from shared.config import TextConfig  # noqa: E402
from shared.text.segment import Segmenter  # noqa: E402

ITEMS = ROOT / "scripts" / "data" / "deep_facts.jsonl"
BENCH_DATA = ROOT.parent / "shared" / "bench" / "data"
NAME = "deep_facts"

# Characters of filler before the fact, and after it, per language (uniform in the range).
BEFORE = {"en": (3000, 6000), "zh": (1500, 3000)}
AFTER = {"en": (500, 1500), "zh": (250, 750)}

# Words too common to link a question to its fact (beyond the segmenter's stop words): a
# question may share these with its fact. Anything else shared makes the item lexical.
COMMON = frozenset("""
    my our your his her their i we you he she they me us him them mine
    do does did done doing have has had get got go goes went make makes made
    what which when where who whom how why much many long old often
    one two three first last each every all some any
    now then before after ever still only also
    day days week weeks month months year years time times
    做 用 里 家 家里 我们 我家 时候 一个 一次 多少 什么 哪里 哪儿 怎么 怎么样 现在 以前 以后
""".split())

# LoCoMo and MADial contents open with "[2023-05-08 13:56]\n" or "[2023-12-25] ".
_TIME_PREFIX = re.compile(r"^\[[^\]]*\]\s*")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


def _stem_clash(a: str, b: str) -> bool:
    """English terms of one family (grandmother / grandma, month / monthly): a shared
    5-letter start, or one a 4-letter-or-longer start of the other."""
    if not (a.isascii() and b.isascii()):
        return False
    short, other = sorted((a, b), key=len)
    return (len(short) >= 4 and other.startswith(short)) or (len(short) >= 5 and a[:5] == b[:5])


def offenders(items: list[dict], segmenter: Segmenter) -> list[str]:
    """One line per item whose question shares a rare term (or an English stem) with its fact."""
    found = []
    for item in items:
        fact = set(segmenter.terms(item["fact"])) - COMMON
        question = set(segmenter.terms(item["question"])) - COMMON
        shared = sorted(fact & question)
        shared += sorted(f"{q}~{f}" for q in question for f in fact if q != f and _stem_clash(q, f))
        if shared:
            found.append(f"{item['id']}: shares {', '.join(shared)}\n  fact: {item['fact']}\n"
                         f"  question: {item['question']}")
    return found


def check(items: list[dict]) -> None:
    ids = [item["id"] for item in items]
    if len(set(ids)) != len(ids):
        raise SystemExit("duplicate item ids in " + str(ITEMS))
    bad = [item["id"] for item in items if item.get("lang") not in BEFORE]
    if bad:
        raise SystemExit(f"items without lang en or zh: {', '.join(bad)}")
    found = offenders(items, Segmenter(TextConfig()))
    if found:
        raise SystemExit(f"{len(found)} items link question and fact by a word, not by meaning:\n"
                         + "\n".join(found))


def filler_lines(lang: str) -> list[str]:
    """The filler, as lines in reading order."""
    if lang == "en":
        lines = []
        for row in read_jsonl(BENCH_DATA / "locomo_session_dev.memories.jsonl"):
            lines += [line for line in _TIME_PREFIX.sub("", row["content"]).splitlines() if line.strip()]
        return lines
    # MADial's memories are one sentence each: run together like a diary, a few to a line.
    sentences = [_TIME_PREFIX.sub("", row["content"]).strip()
                 for row in read_jsonl(BENCH_DATA / "madial_zh_dev.memories.jsonl")]
    return ["".join(sentences[i:i + 4]) for i in range(0, len(sentences), 4)]


def take(lines: list[str], start: int, chars: int) -> tuple[list[str], int]:
    """Consecutive lines from start (wrapping round) until at least chars characters."""
    out, size, at = [], 0, start
    while size < chars:
        out.append(lines[at % len(lines)])
        size += len(out[-1]) + 1
        at += 1
    return out, at % len(lines)


def build(items: list[dict], seed: int) -> tuple[list[dict], list[dict], dict[str, list[int]]]:
    """(memories, queries, {language: each fact's character offset in its memory})."""
    rng = random.Random(seed)
    memories, queries, offsets = [], [], {lang: [] for lang in BEFORE}
    for lang in BEFORE:
        lines = filler_lines(lang)
        mine = [item for item in items if item["lang"] == lang]
        # Facts and filler-only memories interleaved in a seeded order, so neither comes first.
        slots = [(item["id"], item) for item in mine] + [(f"{lang}-d{n + 1:02d}", None) for n in range(len(mine))]
        rng.shuffle(slots)
        for name, item in slots:
            before, rest = take(lines, rng.randrange(len(lines)), rng.randint(*BEFORE[lang]))
            after, _ = take(lines, rest, rng.randint(*AFTER[lang]))
            head = "\n".join(before) + "\n"
            content = head + (item["fact"] + "\n" if item else "") + "\n".join(after)
            memories.append({"id": f"m:{name}", "group": lang, "content": content, "participants": [],
                             "time": None, "session": None})
            if item:
                offsets[lang].append(len(head))
                queries.append({"id": f"q:{name}", "group": lang, "question": item["question"],
                                "answer": item["fact"], "category": lang, "evidence": [f"m:{name}"]})
    queries.sort(key=lambda q: q["id"])
    return memories, queries, offsets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / "bench_out" / NAME,
                        help="folder for deep_facts.memories.jsonl and deep_facts.queries.jsonl")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--check", action="store_true", help="only check the items, write nothing")
    args = parser.parse_args()
    items = read_jsonl(ITEMS)
    check(items)
    if args.check:
        print(f"{len(items)} items, none shares a rare term between question and fact")
        return
    memories, queries, offsets = build(items, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    for kind, rows in (("memories", memories), ("queries", queries)):
        with (args.out / f"{NAME}.{kind}.jsonl").open("w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    print(f"{args.out}: {len(memories)} memories, {len(queries)} queries")
    for lang in BEFORE:
        sizes = [len(m["content"]) for m in memories if m["group"] == lang]
        lang_offsets = offsets[lang]
        print(f"  {lang}: {len(sizes)} memories, mean length {statistics.fmean(sizes):,.0f} characters; "
              f"fact at character {statistics.fmean(lang_offsets):,.0f} on average "
              f"(min {min(lang_offsets):,}, max {max(lang_offsets):,})")


if __name__ == "__main__":
    main()
