"""`aokun import` of a generated ChatGPT conversations.json: time until every conversation is
stored, peak memory of the import process, and the time of importing it again (all present).

    .venv/bin/python scripts/bench_chat_import.py [--conversations 1000] [--kind chatgpt|claude]

Each conversation is twelve messages, English and Chinese in turn: the user's short statements
and questions, the assistant's answers of about 1,500 characters (a real export's answers are
most of its bytes), in ChatGPT's message tree or Claude's message list. Prints numbers; not a test.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

USER_EN = ["I moved to Lyon last spring with my sister Anna.", "How do I keep basil alive indoors?",
           "I prefer running in the morning before work.", "What is a good stretch after a long run?",
           "My daughter starts school next September.", "Can you explain how compound interest works?"]
USER_ZH = ["我最近开始学游泳了，每周去两次。", "怎么做红烧肉比较好吃？", "我下个月要去杭州出差三天。",
           "有什么适合初学者的吉他曲子？", "我女儿喜欢画画，想给她报个班。", "如何提高睡眠质量？"]
ANSWER_EN = ("Here is a short overview. First, consider the basics and why they matter; then the "
             "common mistakes people make and how to avoid them. ") * 12
ANSWER_ZH = "这里有几点建议。首先要了解基本原理，然后注意常见的误区，并且循序渐进地练习。" * 20


def turns(index: int) -> list[tuple[str, str]]:
    said = USER_ZH if index % 2 else USER_EN
    answer = ANSWER_ZH if index % 2 else ANSWER_EN
    return [pair for i in range(6) for pair in (("user", f"{said[(index + i) % 6]} ({index}-{i})"),
                                                ("assistant", answer))]


def chatgpt(index: int) -> dict:
    begun = 1_700_000_000 + index * 3600.0
    mapping: dict[str, dict] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    last = "root"
    for number, (role, text) in enumerate(turns(index)):
        key = f"{index}-{number}"
        mapping[key] = {"id": key, "parent": last, "children": [], "message": {
            "id": key, "author": {"role": role, "name": None, "metadata": {}}, "create_time": begun + number * 60,
            "content": {"content_type": "text", "parts": [text]}, "status": "finished_successfully",
            "metadata": {}, "recipient": "all"}}
        mapping[last]["children"].append(key)
        last = key
    ident = f"bench-{index:08d}"
    return {"title": f"Bench conversation {index}", "create_time": begun, "update_time": begun + 720,
            "mapping": mapping, "current_node": last, "conversation_id": ident, "id": ident}


def claude(index: int) -> dict:
    begun = 1_700_000_000 + index * 3600

    def iso(seconds: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(seconds))

    messages = [{"uuid": f"{index}-{n}", "sender": "human" if role == "user" else "assistant", "text": text,
                 "content": [{"type": "text", "text": text}], "created_at": iso(begun + n * 60)}
                for n, (role, text) in enumerate(turns(index))]
    return {"uuid": f"bench-{index:08d}", "name": f"Bench conversation {index}", "created_at": iso(begun),
            "updated_at": iso(begun + 720), "chat_messages": messages}


def run(args: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run([str(BIN / "aokun"), *args], capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"aokun {' '.join(args)} exited {result.returncode}: {result.stderr[-1000:]}")
    return elapsed, result.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--kind", choices=("chatgpt", "claude"), default="chatgpt")
    options = parser.parse_args()
    make = chatgpt if options.kind == "chatgpt" else claude
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        config = work / "config.yaml"
        config.write_text(yaml.safe_dump({"storage": {"data_dir": "data"}, "worker": {"autostart": False}}))
        export = work / "conversations.json"
        with export.open("w", encoding="utf-8") as out:  # as the service writes it: one line
            out.write("[")
            for index in range(options.conversations):
                out.write(("," if index else "") + json.dumps(make(index), ensure_ascii=False))
            out.write("]")
        size = export.stat().st_size
        first, summary = run(["import", str(export), "--config", str(config)])
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        again, again_summary = run(["import", str(export), "--config", str(config)])
        print(f"{options.kind}: {options.conversations} conversations, {size / 1024 / 1024:.1f} MB")
        print(f"import: {first:.1f} s ({options.conversations / first:.1f} conversations/s), "
              f"peak RSS {peak:.0f} MB: {summary}")
        print(f"again: {again:.1f} s: {again_summary}")


if __name__ == "__main__":
    main()
