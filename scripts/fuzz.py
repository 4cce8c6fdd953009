#!/usr/bin/env python3
"""Fuzz every input path with generated garbage: the stdio front, the streamable
HTTP front, `aokun import` and `aokun ingest`, each a real process on a config of its own.

The garbage is seeded (random.Random(seed)), so a failure names its seed and target and runs
again the same: random bytes, invalid UTF-8, lone surrogates (raw and as \\ud800 escapes),
NULs, nesting 50,000 deep, huge numbers (1e308, 1e999, 10**5000 in digits), huge strings,
wrong JSON-RPC shapes (no method, ids of every type, params of the wrong type) and real tool
calls with garbage arguments. Valid calls are interleaved; after the garbage each target must:

- stdio / HTTP: still answer ping and recall, and hold every memory it acknowledged with the
  text it acknowledged (a process that died, a 5xx, a hang past its timeout is a finding);
- import: exit 0 or 1 with no traceback, one error line per skipped row, every valid row in;
- ingest: exit 0, or 2 with an `aokun ingest:` line; each warning one such line; never a traceback.

tests/process/test_fuzz.py runs a fixed few cases per target; this script runs for a while:

    .venv/bin/python scripts/fuzz.py [--seconds 180] [--seed N] [--targets stdio,http,import,ingest]
                                     [--keep]

It prints the cases tried per kind and target, and every finding with its seed and case.
Exit status 1 if anything was found. Everything runs on 127.0.0.1 in a temporary folder.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BIN = Path(sys.executable).parent
DEEP = 50_000
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}}
REPLY_TIMEOUT_S = 60.0


class Finding(AssertionError):
    """What a target did wrong, with the seed and case that made it."""


# --- the garbage --------------------------------------------------------------------------------

SURROGATE_ESCAPES = ["\\ud800", "\\udfff", "\\udbff\\udbff", "\\udc00\\ud800", "a\\ud83dz"]
RAW_SURROGATES = [b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xa0\xbd\xed\xb8\x80"]  # CESU, invalid UTF-8
INVALID_UTF8 = [b"\xff", b"\xfe", b"\xc3", b"\xc3\x28", b"\xe2\x82", b"\xf0\x9f\x98", b"\x80",
                b"\xc0\xaf", b"\xf8\x88\x80\x80\x80", b"\xf4\x90\x80\x80"]
HUGE_NUMBERS = ["1e308", "-1e308", "1e999", "-1e999", "1" + "0" * 5000, "-" + "9" * 5000,
                "0." + "0" * 5000 + "1", "1e-999", "9223372036854775808", "-9223372036854775809",
                "18446744073709551616", "NaN", "Infinity", "-Infinity", "1E400", "4.9e-324"]
TOOLS = ("memorize", "recall", "list_memories", "edit_memory", "search_atoms", "delete_memory",
         "pin_memory", "unknown_tool", "")
DESTRUCTIVE = ("edit_memory", "delete_memory", "pin_memory")
BAD_IDS = ['"one"', "1.5", "true", "null", "[]", "{}", "-1", "0", "1" + "0" * 40, "1e999",
           '"\\ud800"', "-" + "9" * 400]  # never a real memory id: garbage must not delete one


def nest(rng: random.Random, depth: int = DEEP) -> str:
    """A value nested `depth` deep: arrays, objects or both, closed or not."""
    kind = rng.choice(("array", "object", "mixed"))
    if kind == "array":
        text = "[" * depth + "]" * depth
    elif kind == "object":
        text = '{"a":' * depth + "1" + "}" * depth
    else:
        text = '[{"a":' * (depth // 2) + "1" + "}]" * (depth // 2)
    if rng.random() < 0.2:
        text = text[: len(text) // 2 + rng.randrange(3)]  # cut off inside the nesting
    return text


def garbage_string(rng: random.Random) -> str:
    """A JSON string literal (quotes included) full of trouble."""
    pick = rng.randrange(8)
    if pick == 0:
        return '"' + rng.choice(SURROGATE_ESCAPES) + '"'
    if pick == 1:
        return '"a\\u0000b\\u0000"'
    if pick == 2:
        return json.dumps("x" * rng.choice((20_001, 200_000, 1_000_000)))
    if pick == 3:
        return json.dumps("".join(chr(rng.randrange(1, 0x2FFFF)) for _ in range(rng.randrange(1, 60)))
                          .encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
    if pick == 4:
        return '"\\u202e\\ufeff\\u200b  \\t\\n"'
    if pick == 5:
        return '""'
    if pick == 6:
        return json.dumps(" " * rng.randrange(1, 50))
    return json.dumps("'; DROP TABLE documents; -- \" OR 1=1 NEAR( * ^ MATCH")


def garbage_value(rng: random.Random, depth: int = 0) -> str:
    """Any JSON value text, often of a type or size nothing expects."""
    pick = rng.randrange(10 if depth < 3 else 6)
    if pick == 0:
        return rng.choice(HUGE_NUMBERS)
    if pick == 1:
        return garbage_string(rng)
    if pick == 2:
        return rng.choice(("true", "false", "null", "0", "-0", "1.0", "-1", "[]", "{}"))
    if pick == 3:
        return nest(rng, rng.choice((DEEP, 1000, 200)))
    if pick == 4:
        return str(rng.randint(-10**20, 10**20))
    if pick == 5:
        return json.dumps(rng.random() * 10 ** rng.randrange(-300, 300))
    if pick == 6:
        return "[" + ",".join(garbage_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))) + "]"
    if pick == 7:
        return "{" + ",".join(f"{garbage_string(rng)}:{garbage_value(rng, depth + 1)}"
                              for _ in range(rng.randrange(0, 5))) + "}"
    if pick == 8:
        return "{" + ",".join(f'"k{i}":1' for i in range(rng.choice((1000, 20_000)))) + "}"
    return '"' + "\\" * rng.randrange(1, 5) + '"'


def garbage_arguments(rng: random.Random, tool: str) -> str:
    """Arguments for `tool`: its own keys with garbage values, or garbage of any shape."""
    keys = {"memorize": ["content", "metadata"], "recall": ["query", "k", "explain", "persona_id"],
            "list_memories": ["limit", "offset", "persona_id"], "search_atoms": ["query", "k", "types"],
            "edit_memory": ["id", "content", "metadata"], "delete_memory": ["id"],
            "pin_memory": ["id", "pinned"]}.get(tool, ["x"])
    if rng.random() < 0.15:
        return garbage_value(rng)  # arguments not even an object
    parts = []
    for key in keys:
        if rng.random() < 0.75:
            if key == "id":
                parts.append(f'"id":{rng.choice(BAD_IDS)}')
            elif key == "metadata" and rng.random() < 0.6:
                meta = rng.sample(["importance", "topics", "participants", "key_facts", "pinned",
                                   "original_time", "persona_id", "sentiment", "persona_summary",
                                   "colour"], rng.randrange(1, 4))
                parts.append('"metadata":{' + ",".join(f'"{m}":{garbage_value(rng)}' for m in meta) + "}")
            else:
                parts.append(f'"{key}":{garbage_value(rng)}')
    if tool in DESTRUCTIVE and not any(p.startswith('"id"') for p in parts):
        parts.append(f'"id":{rng.choice(BAD_IDS)}')
    if rng.random() < 0.2:
        parts.append(f"{garbage_string(rng)}:{garbage_value(rng)}")
    return "{" + ",".join(parts) + "}"


def rpc_id(rng: random.Random) -> str:
    return rng.choice(['"g"', "0", "-1", "1.5", "true", "null", "[]", "{}", '"\\ud800"', "1e999",
                       "1" + "0" * 400, '""', '"' + "i" * 10_000 + '"'])


KINDS_RPC = ("random_bytes", "invalid_utf8", "lone_surrogate", "nul", "deep_nesting", "huge_number",
             "huge_string", "wrong_shape", "garbage_arguments", "cut_off", "batch")


def rpc_garbage(rng: random.Random, kind: str, ident: str) -> bytes:
    """One garbage JSON-RPC message body (may hold newlines only where `kind` is random bytes).
    `ident` is the id to use where the message is a real tool call (so its reply is known)."""
    if kind == "random_bytes":
        return bytes(rng.randrange(256) for _ in range(rng.choice((1, 16, 300, 5000))))
    if kind == "invalid_utf8":
        bad = rng.choice(INVALID_UTF8)
        return b'{"jsonrpc":"2.0","id":' + ident.encode() + b',"method":"ping","params":{"x":"' + bad + b'"}}'
    if kind == "lone_surrogate":
        where = rng.randrange(4)
        s = rng.choice(SURROGATE_ESCAPES)
        if where == 0:
            return f'{{"jsonrpc":"2.0","id":"{s}","method":"ping"}}'.encode()
        if where == 1:
            return f'{{"jsonrpc":"2.0","id":{ident},"method":"{s}"}}'.encode()
        if where == 2:
            return (f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":"memorize",'
                    f'"arguments":{{"content":"fuzz {s} surrogate"}}}}}}').encode()
        return (b'{"jsonrpc":"2.0","id":' + ident.encode() + b',"method":"tools/call","params":{"name":"recall",'
                b'"arguments":{"query":"' + rng.choice(RAW_SURROGATES) + b'"}}}')
    if kind == "nul":
        return rng.choice([b"\x00" * rng.randrange(1, 200),
                           b'{"jsonrpc":"2.0","id":' + ident.encode() + b',"method":"ping"}\x00',
                           b'{"jsonrpc":"2.0","id":' + ident.encode() + b',"me\x00thod":"ping"}',
                           (f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":"recall",'
                            f'"arguments":{{"query":"a\\u0000b"}}}}}}').encode()])
    if kind == "deep_nesting":
        where = rng.randrange(3)
        value = nest(rng)
        if where == 0:
            return value.encode()
        if where == 1:
            return f'{{"jsonrpc":"2.0","id":{ident},"method":"ping","params":{value}}}'.encode()
        return (f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":"memorize",'
                f'"arguments":{{"content":"x","metadata":{value}}}}}}}').encode()
    if kind == "huge_number":
        n = rng.choice(HUGE_NUMBERS)
        return rng.choice([f'{{"jsonrpc":"2.0","id":{n},"method":"ping"}}',
                           f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":"recall",'
                           f'"arguments":{{"query":"x","k":{n}}}}}}}',
                           f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":"list_memories",'
                           f'"arguments":{{"limit":{n},"offset":{rng.choice(HUGE_NUMBERS)}}}}}}}',
                           f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":"edit_memory",'
                           f'"arguments":{{"id":{n},"content":"x"}}}}}}',
                           f'{{"jsonrpc":{n},"id":{ident},"method":"ping"}}']).encode()
    if kind == "huge_string":
        size = rng.choice((20_001, 1_000_000, 5_000_000))
        return rng.choice([
            f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":"memorize",'
            f'"arguments":{{"content":"{"y" * size}"}}}}}}',
            f'{{"jsonrpc":"2.0","id":{ident},"method":"{"m" * size}"}}',
            f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":"recall",'
            f'"arguments":{{"query":"{"q " * (size // 2)}"}}}}}}']).encode()
    if kind == "wrong_shape":
        return rng.choice([
            f'{{"jsonrpc":"2.0","id":{ident}}}',
            f'{{"jsonrpc":"1.0","id":{ident},"method":"ping"}}',
            f'{{"id":{ident},"method":"ping"}}',
            f'{{"jsonrpc":"2.0","id":{rpc_id(rng)},"method":"ping"}}',
            f'{{"jsonrpc":"2.0","id":{ident},"method":{garbage_value(rng)}}}',
            f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{garbage_value(rng)}}}',
            f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":{garbage_value(rng)}}}}}',
            f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/list","params":{garbage_value(rng)}}}',
            f'{{"jsonrpc":"2.0","id":{ident},"method":"initialize","params":{garbage_value(rng)}}}',
            f'{{"jsonrpc":"2.0","id":{ident},"result":{garbage_value(rng)}}}',
            f'{{"jsonrpc":"2.0","id":{ident},"error":{garbage_value(rng)}}}',
            f'{{"jsonrpc":"2.0","method":"notifications/{garbage_string(rng)[1:-1]}","params":{garbage_value(rng)}}}',
            f'{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{garbage_value(rng)}}}}}',
            f'{{"jsonrpc":"2.0","id":{ident},"id":{rpc_id(rng)},"method":"ping"}}',
            garbage_value(rng),
            "[]", "{}", "null", '"ping"', "1"]).encode()
    if kind == "garbage_arguments":
        tool = rng.choice(TOOLS)
        return (f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":"{tool}",'
                f'"arguments":{garbage_arguments(rng, tool)}}}}}').encode()
    if kind == "cut_off":
        whole = (f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":"memorize",'
                 f'"arguments":{{"content":"never whole"}}}}}}').encode()
        return whole[: rng.randrange(1, len(whole) - 1)]
    if kind == "batch":
        items = ",".join(f'{{"jsonrpc":"2.0","id":{rpc_id(rng)},"method":"ping"}}' for _ in range(rng.randrange(0, 4)))
        return f"[{items}]".encode()
    raise ValueError(kind)


def one_line(raw: bytes) -> bytes:
    """A stdio line: its own newlines turned into spaces (JSON allows them between tokens)."""
    return raw.replace(b"\n", b" ").replace(b"\r", b" ")


KINDS_ROW = ("random_bytes", "invalid_utf8", "lone_surrogate", "nul", "deep_nesting", "huge_number",
             "huge_string", "wrong_shape", "garbage_fields", "cut_off")
ROW_FIELDS = ("text", "create_time", "update_time", "original_time", "importance", "pinned",
              "persona_id", "session_id", "access_count", "metadata", "topics", "key_facts", "id",
              "content_hash", "atoms")


def row_garbage(rng: random.Random, kind: str) -> bytes:
    """One garbage line of an Aokun export (JSONL)."""
    if kind in ("random_bytes", "deep_nesting", "wrong_shape", "cut_off") or kind not in KINDS_ROW:
        if kind == "random_bytes":
            raw = bytes(rng.randrange(256) for _ in range(rng.choice((1, 16, 300, 5000))))
        elif kind == "deep_nesting":
            raw = rng.choice([nest(rng), f'{{"text":"deep","metadata":{nest(rng)}}}',
                              f'{{"text":{nest(rng)}}}']).encode()
        elif kind == "wrong_shape":
            raw = rng.choice([garbage_value(rng), "[]", "null", '"text"', '{"text":null}', '{"txt":"x"}',
                              '{"text":["a"]}', '{"text":{"a":1}}', '{"text":1}', '{"text":"ok","text":5}',
                              '[{"text":"in an array"}]']).encode()
        else:
            whole = json.dumps({"text": "cut off row", "create_time": 1.0}).encode()
            raw = whole[: rng.randrange(1, len(whole) - 1)]
        return one_line(raw)
    if kind == "invalid_utf8":
        return b'{"text":"bad ' + rng.choice(INVALID_UTF8) + b' byte"}'
    if kind == "lone_surrogate":
        return rng.choice([f'{{"text":"lone {rng.choice(SURROGATE_ESCAPES)} row"}}'.encode(),
                           f'{{"text":"x","persona_id":"{rng.choice(SURROGATE_ESCAPES)}"}}'.encode(),
                           b'{"text":"raw ' + rng.choice(RAW_SURROGATES) + b'"}'])
    if kind == "nul":
        return rng.choice([b"\x00" * rng.randrange(1, 100), b'{"text":"nul\x00inside"}',
                           b'{"text":"escaped \\u0000 nul","persona_id":"a\\u0000"}'])
    if kind == "huge_number":
        field = rng.choice(("create_time", "update_time", "importance", "access_count", "pinned", "id",
                            "original_time"))
        return f'{{"text":"huge {field}","{field}":{rng.choice(HUGE_NUMBERS)}}}'.encode()
    if kind == "huge_string":
        size = rng.choice((20_001, 1_000_000, 3_000_000))
        field = rng.choice(("text", "persona_id", "session_id", "original_time"))
        return json.dumps({"text": "huge", field: "z" * size}).encode()
    fields = rng.sample(ROW_FIELDS, rng.randrange(1, 5))
    return one_line(("{" + ",".join(f'"{f}":{garbage_value(rng)}' for f in fields) + "}").encode())


KINDS_TRANSCRIPT = ("random_bytes", "invalid_utf8", "lone_surrogate", "nul", "deep_nesting",
                    "huge_number", "huge_string", "wrong_shape", "claude_garbage", "hook_stdin")


def transcript_garbage(rng: random.Random, kind: str, big: int = 3_000_000) -> tuple[bytes, bytes | None]:
    """(transcript file bytes, hook stdin or None) for one `aokun ingest` run; `big` is the
    largest huge transcript (3 MB of words takes the rules summarizer about 35 s)."""
    turn = lambda text: json.dumps({"role": "user", "content": text})  # noqa: E731
    if kind == "random_bytes":
        return bytes(rng.randrange(256) for _ in range(rng.choice((1, 300, 20_000)))), None
    if kind == "invalid_utf8":
        return (b"Ann: I like tea " + rng.choice(INVALID_UTF8) + b"\nBen: me too\n"), None
    if kind == "lone_surrogate":
        s = rng.choice(SURROGATE_ESCAPES)
        return rng.choice([f'{{"role":"user","content":"I like {s} tea"}}\n'.encode(),
                           f'[{{"speaker":"{s}","text":"hello there"}}]'.encode(),
                           b"Ann: raw " + rng.choice(RAW_SURROGATES) + b" surrogate\n"]), None
    if kind == "nul":
        return rng.choice([b"\x00" * 500, b"Ann: tea\x00 please\nBen: \x00\n",
                           (turn("a\u0000b") + "\n").encode()]), None
    if kind == "deep_nesting":
        return rng.choice([nest(rng), '{"role":"user","content":' + nest(rng) + "}",
                           turn("ok") + "\n" + nest(rng)]).encode(), None
    if kind == "huge_number":
        n = rng.choice(HUGE_NUMBERS)
        return rng.choice([f'{{"role":"user","content":"hi","timestamp":{n}}}',
                           f'[{{"speaker":"Ann","text":"hi","time":{n}}}]',
                           f'{{"type":"user","message":{{"role":"user","content":"hi"}},"timestamp":{n}}}',
                           n]).encode(), None
    if kind == "huge_string":
        size = rng.choice((min(100_000, big), big))
        return rng.choice([("Ann: " + "word " * (size // 5) + "\n").encode(),
                           ("A" * size + ": hi\n").encode(),
                           ("Ann: " + "x" * size + "\n").encode()]), None
    if kind == "wrong_shape":
        return "\n".join(garbage_value(rng) for _ in range(rng.randrange(1, 6))).encode(), None
    if kind == "claude_garbage":
        lines = []
        for _ in range(rng.randrange(1, 6)):
            kind_value = rng.choice(['"user"', '"assistant"', garbage_value(rng)])
            lines.append(f'{{"type":{kind_value},'
                         f'"message":{{"role":"user","content":{garbage_value(rng)}}},'
                         f'"timestamp":{garbage_value(rng)},"sessionId":{garbage_value(rng)}}}')
        return one_line("\n".join(lines).encode()).replace(b"} {", b"}\n{"), None
    # hook_stdin: a good transcript, garbage on stdin
    body = b"Ann: I keep bees on the roof\nBen: since when?\n"
    hook = rng.choice([rpc_garbage(rng, rng.choice(KINDS_RPC), "1"),
                       f'{{"transcript_path":{garbage_value(rng)}}}'.encode(),
                       f'{{"transcript_path":"TRANSCRIPT","session_id":{garbage_value(rng)}}}'.encode(),
                       b'{"transcript_path":"/dev/zero\x00"}', b"", b"\xff\xfe"])
    return body, hook


# --- processes ----------------------------------------------------------------------------------

def write_config(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yaml"
    path.write_text("storage:\n  data_dir: data\nworker:\n  autostart: false\n", encoding="utf-8")
    return path


def stored_texts(config: Path) -> dict[int, str]:
    """{id: text without its time marker} straight from the database."""
    from shared.store.model.documents import unmarked

    db = config.parent / "data" / "aokun.db"
    if not db.exists():
        return {}
    conn = sqlite3.connect(db, timeout=30)
    try:
        return {i: unmarked(t) for i, t in conn.execute("SELECT id, text FROM documents")}
    finally:
        conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tally:
    """Cases tried per target and kind, and findings."""

    def __init__(self):
        self.tried: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.findings: list[str] = []

    def report(self) -> str:
        out = []
        for target, counts in self.tried.items():
            out.append(f"{target}: {sum(counts.values())} cases — "
                       + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
        out.append(f"findings: {len(self.findings)}")
        out.extend(f"  - {f}" for f in self.findings)
        return "\n".join(out)


def _kind_plan(rng: random.Random, kinds, cases: int) -> list[str]:
    """Every kind at least once where cases allow, the rest at random."""
    plan = list(kinds)[:cases]
    plan += [rng.choice(kinds) for _ in range(cases - len(plan))]
    rng.shuffle(plan)
    return plan


def fuzz_stdio(workdir: Path, seed: int, cases: int, tally: Tally, kinds=KINDS_RPC) -> None:
    """Garbage lines into a real `aokun-server` over stdio, a valid memorize after every few."""
    rng = random.Random(f"stdio-{seed}")
    config = write_config(workdir / f"stdio-{seed}")
    errlog = open(config.parent / "stderr.log", "wb")
    proc = subprocess.Popen([str(BIN / "aokun-server"), "--config", str(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog)
    errlog.close()
    replies: dict = {}
    arrived = threading.Condition()

    def pump():
        for line in proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                message = {"unparsable": line[:200].decode("utf-8", "replace")}
            with arrived:
                key = message.get("id") if isinstance(message, dict) else None
                replies.setdefault(json.dumps(key), []).append(message)
                arrived.notify_all()
        with arrived:
            replies["<eof>"] = True
            arrived.notify_all()

    threading.Thread(target=pump, daemon=True).start()
    where = f"stdio seed {seed}"

    def send(raw: bytes) -> None:
        try:
            proc.stdin.write(raw + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise Finding(f"{where}: the server closed stdin (exit {proc.poll()}); "
                          f"stderr in {config.parent / 'stderr.log'}") from None

    def wait(ident, what: str) -> dict:
        key = json.dumps(ident)
        with arrived:
            if not arrived.wait_for(lambda: key in replies or "<eof>" in replies, REPLY_TIMEOUT_S):
                raise Finding(f"{where}: no reply to {what} within {REPLY_TIMEOUT_S:.0f} s")
            if key not in replies:
                raise Finding(f"{where}: the server ended (exit {proc.poll()}) before answering {what}")
            return replies.pop(key)[-1]

    acknowledged: dict[int, str] = {}
    try:
        send(json.dumps(INITIALIZE).encode())
        wait(1, "initialize")
        send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        for n, kind in enumerate(_kind_plan(rng, kinds, cases)):
            ident = f'"g-{n}"'
            raw = one_line(rpc_garbage(rng, kind, ident))
            tally.tried["stdio"][kind] += 1
            send(raw)
            if proc.poll() is not None:
                raise Finding(f"{where}: the server died (exit {proc.returncode}) after {kind} case {n}: "
                              f"{raw[:300]!r}")
            if n % 3 == 2:  # a valid memorize, which must be acknowledged, in between
                content = f"fuzz stdio memory {seed}-{n} {rng.randrange(10**9)}"
                send(json.dumps({"jsonrpc": "2.0", "id": f"v-{n}", "method": "tools/call",
                                 "params": {"name": "memorize", "arguments": {"content": content}}}).encode())
                reply = wait(f"v-{n}", f"the valid memorize after {kind} case {n} ({raw[:200]!r})")
                result = reply.get("result") or {}
                if result.get("isError") or "structuredContent" not in result:
                    raise Finding(f"{where}: a valid memorize after {kind} case {n} failed: {reply}")
                acknowledged[result["structuredContent"]["id"]] = content
        send(b'{"jsonrpc":"2.0","id":"last-ping","method":"ping"}')
        if wait("last-ping", "the last ping").get("result") != {}:
            raise Finding(f"{where}: the last ping was not answered with an empty result")
        # Every garbage reply that acknowledged a memory counts as acknowledged too.
        with arrived:
            for messages in list(replies.values()):
                for m in messages if isinstance(messages, list) else []:
                    sc = (m.get("result") or {}).get("structuredContent") if isinstance(m, dict) else None
                    if isinstance(sc, dict) and sc.get("status") == "accepted" and "id" in sc:
                        acknowledged.setdefault(sc["id"], sc.get("text"))
        if acknowledged:
            probe = next(iter(v for v in acknowledged.values() if v and v.startswith("fuzz stdio")), None)
            if probe:
                send(json.dumps({"jsonrpc": "2.0", "id": "last-recall", "method": "tools/call",
                                 "params": {"name": "recall", "arguments": {"query": probe}}}).encode())
                reply = wait("last-recall", "the last recall")
                if (reply.get("result") or {}).get("isError") or "result" not in reply:
                    raise Finding(f"{where}: the last recall failed: {reply}")
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = "hung"
    if code != 0:
        raise Finding(f"{where}: the server did not end cleanly on end of input (exit {code})")
    check_acknowledged(where, config, acknowledged)


def check_acknowledged(where: str, config: Path, acknowledged: dict[int, str | None]) -> None:
    from shared.store.model.documents import unmarked

    stored = stored_texts(config)
    for ident, text in acknowledged.items():
        if ident not in stored:
            raise Finding(f"{where}: acknowledged memory {ident} is not in the store")
        if text is not None and unmarked(text) != stored[ident]:
            raise Finding(f"{where}: memory {ident} holds {stored[ident][:100]!r}, acknowledged "
                          f"{unmarked(text)[:100]!r}")


def _sse_messages(response) -> list[dict]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    try:
        body = response.json()
    except ValueError:
        return []
    return body if isinstance(body, list) else [body]


def fuzz_http(workdir: Path, seed: int, cases: int, tally: Tally, kinds=KINDS_RPC) -> None:
    """Garbage bodies POSTed to a real `aokun-server --transport http`, with and without its
    session and token; a valid memorize after every few."""
    import httpx

    rng = random.Random(f"http-{seed}")
    config = write_config(workdir / f"http-{seed}")
    token = "fuzz-token"
    with open(config, "a", encoding="utf-8") as f:
        f.write(f"server:\n  token: {token}\n")
    port = free_port()
    errlog = open(config.parent / "stderr.log", "wb")
    proc = subprocess.Popen([str(BIN / "aokun-server"), "--config", str(config), "--transport", "http",
                             "--port", str(port)], stdout=errlog, stderr=errlog)
    errlog.close()
    where = f"http seed {seed}"
    url = f"http://127.0.0.1:{port}/mcp"
    acknowledged: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise Finding(f"{where}: the server did not start") from None
                time.sleep(0.1)
        base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                "Authorization": f"Bearer {token}"}
        with httpx.Client(timeout=REPLY_TIMEOUT_S) as client:
            r = client.post(url, headers=base, json=INITIALIZE)
            session = {**base, "mcp-session-id": r.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-06-18"}
            client.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            for n, kind in enumerate(_kind_plan(rng, kinds, cases)):
                body = rpc_garbage(rng, kind, f'"g-{n}"')
                headers = rng.choice([session, session, session, base,
                                      {**session, "Content-Type": rng.choice([
                                          "text/plain", "application/json; charset=latin-1", "",
                                          "application/x-www-form-urlencoded"])},
                                      {**session, "mcp-session-id": rng.choice(["nope", "x" * 5000, "\x7f"])},
                                      {**session, "mcp-protocol-version": rng.choice(["1999-01-01", "x"])},
                                      {**session, "Accept": "text/html"},
                                      {**session, "Authorization": "Bearer wrong"}])
                tally.tried["http"][kind] += 1
                try:
                    r = client.post(url, headers=headers, content=body)
                except httpx.HTTPError as exc:
                    raise Finding(f"{where}: {kind} case {n} got no response ({type(exc).__name__}: {exc}); "
                                  f"body {body[:300]!r}") from None
                if r.status_code >= 500:
                    raise Finding(f"{where}: {kind} case {n} got HTTP {r.status_code} {r.text[:300]!r}; "
                                  f"body {body[:300]!r}")
                if proc.poll() is not None:
                    raise Finding(f"{where}: the server died (exit {proc.returncode}) after {kind} case {n}")
                for m in _sse_messages(r):
                    sc = (m.get("result") or {}).get("structuredContent") if isinstance(m, dict) else None
                    if isinstance(sc, dict) and sc.get("status") == "accepted" and "id" in sc:
                        acknowledged.setdefault(sc["id"], sc.get("text"))
                if n % 3 == 2:
                    content = f"fuzz http memory {seed}-{n} {rng.randrange(10**9)}"
                    r = client.post(url, headers=session, json={
                        "jsonrpc": "2.0", "id": f"v-{n}", "method": "tools/call",
                        "params": {"name": "memorize", "arguments": {"content": content}}})
                    messages = [m for m in _sse_messages(r) if m.get("id") == f"v-{n}"]
                    result = (messages[0].get("result") or {}) if messages else {}
                    if r.status_code != 200 or result.get("isError") or "structuredContent" not in result:
                        raise Finding(f"{where}: a valid memorize after {kind} case {n} failed: "
                                      f"HTTP {r.status_code} {r.text[:300]!r}")
                    acknowledged[result["structuredContent"]["id"]] = content
            r = client.post(url, headers=session, json={"jsonrpc": "2.0", "id": "p", "method": "ping"})
            if [m.get("result") for m in _sse_messages(r)] != [{}]:
                raise Finding(f"{where}: the last ping got HTTP {r.status_code} {r.text[:300]!r}")
            probe = next((v for v in acknowledged.values() if v and v.startswith("fuzz http")), "fuzz")
            r = client.post(url, headers=session, json={"jsonrpc": "2.0", "id": "r", "method": "tools/call",
                                                         "params": {"name": "recall", "arguments": {"query": probe}}})
            if r.status_code != 200 or any((m.get("result") or {}).get("isError") for m in _sse_messages(r)):
                raise Finding(f"{where}: the last recall got HTTP {r.status_code} {r.text[:300]!r}")
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    check_acknowledged(where, config, acknowledged)


def fuzz_import(workdir: Path, seed: int, cases: int, tally: Tally, kinds=KINDS_ROW) -> None:
    """One export of garbage lines and valid rows through `aokun import`."""
    rng = random.Random(f"import-{seed}")
    config = write_config(workdir / f"import-{seed}")
    where = f"import seed {seed}"
    lines, valid = [], []
    for n, kind in enumerate(_kind_plan(rng, kinds, cases)):
        tally.tried["import"][kind] += 1
        lines.append(row_garbage(rng, kind))
        if n % 2 == 1:
            text = f"fuzz import row {seed}-{n} {rng.randrange(10**9)}"
            valid.append(text)
            lines.append(json.dumps({"text": text, "importance": 0.5}).encode())
    path = config.parent / "rows.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    try:
        result = subprocess.run([str(BIN / "aokun"), "import", str(path), "--config", str(config)],
                                capture_output=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise Finding(f"{where}: `aokun import {path}` did not end within 600 s") from None
    stderr = result.stderr.decode("utf-8", "replace")
    stdout = result.stdout.decode("utf-8", "replace")
    if "Traceback" in stderr or result.returncode not in (0, 1):
        raise Finding(f"{where}: `aokun import {path}` exited {result.returncode}: {stderr[-2000:]}")
    summary = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    if not summary.startswith("imported "):
        raise Finding(f"{where}: no summary line; stdout {stdout[-500:]!r}")
    skipped = int(summary.split("skipped ")[1].split()[0].rstrip(","))
    errors = [e for e in stderr.splitlines() if e.strip()]
    row_errors = [e for e in errors if " line " in e]
    if len(row_errors) != skipped:
        raise Finding(f"{where}: {skipped} rows skipped but {len(row_errors)} named: {stderr[-2000:]}")
    if (result.returncode == 1) != (skipped > 0):
        raise Finding(f"{where}: exit {result.returncode} with {skipped} skipped")
    stored = set(stored_texts(config).values())
    missing = [t for t in valid if t not in stored]
    if missing:
        raise Finding(f"{where}: {len(missing)} valid rows not imported, e.g. {missing[0]!r}; {summary}")


def _ingest_once(config: Path, n: int, kind: str, body: bytes, hook: bytes | None) -> str | None:
    path = config.parent / f"transcript-{n}.txt"
    path.write_bytes(body)
    if hook is not None:
        hook = hook.replace(b"TRANSCRIPT", str(path).encode())
        args = ["ingest", "--from-hook"]
    else:
        args = ["ingest", str(path)] + (["--dry-run"] if n % 2 else [])
    try:
        result = subprocess.run([str(BIN / "aokun"), *args, "--config", str(config)], input=hook or b"",
                                capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        return f"{kind} case {n}: `aokun {' '.join(args)}` did not end within 300 s"
    stderr = result.stderr.decode("utf-8", "replace")
    lines = [e for e in stderr.splitlines() if e.strip()]
    if "Traceback" in stderr:
        return f"{kind} case {n}: traceback (exit {result.returncode}): {stderr[-1500:]}"
    if (result.returncode != 0 and not lines) or any(not e.startswith("aokun ingest:") for e in lines):
        return (f"{kind} case {n}: exit {result.returncode}, stderr not `aokun ingest:` lines (one per "
                f"warning or error): {stderr[-1500:]!r}")
    if result.returncode not in (0, 1, 2):
        return f"{kind} case {n}: exit {result.returncode}: {stderr[-500:]!r}"
    return None


def fuzz_ingest(workdir: Path, seed: int, cases: int, tally: Tally, kinds=KINDS_TRANSCRIPT,
                parallel: int = 6, big: int = 3_000_000) -> None:
    """Garbage transcripts (and hook stdin) through `aokun ingest`, a few processes at a time."""
    rng = random.Random(f"ingest-{seed}")
    config = write_config(workdir / f"ingest-{seed}")
    where = f"ingest seed {seed}"
    runs = []
    for n, kind in enumerate(_kind_plan(rng, kinds, cases)):
        tally.tried["ingest"][kind] += 1
        runs.append((n, kind, *transcript_garbage(rng, kind, big)))
    with ThreadPoolExecutor(parallel) as pool:
        problems = [p for p in pool.map(lambda r: _ingest_once(config, *r), runs) if p]
    # A good transcript after the garbage still goes in.
    good = config.parent / "good.txt"
    good.write_text(f"Ann: fuzz ingest {seed} I keep bees on the roof\nBen: since when?\n", encoding="utf-8")
    result = subprocess.run([str(BIN / "aokun"), "ingest", str(good), "--config", str(config)],
                            capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        problems.append(f"a good transcript after the garbage: exit {result.returncode}: {result.stderr[-500:]}")
    if problems:
        raise Finding(f"{where}: " + " | ".join(problems))


TARGETS = {"stdio": fuzz_stdio, "http": fuzz_http, "import": fuzz_import, "ingest": fuzz_ingest}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--cases", type=int, default=60, help="cases per target per round")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    workdir = Path(tempfile.mkdtemp(prefix="aokun-fuzz-"))
    tally = Tally()
    print(f"fuzzing {', '.join(targets)} for {args.seconds:.0f} s from seed {seed} in {workdir}", flush=True)
    deadline = time.monotonic() + args.seconds
    rounds = 0
    lock = threading.Lock()

    def run_target(name: str) -> None:
        round_seed = seed
        while time.monotonic() < deadline:
            with lock:
                nonlocal rounds
                rounds += 1
            started = time.monotonic()
            try:
                TARGETS[name](workdir, round_seed, args.cases, tally)
                outcome = "ok"
            except Finding as exc:
                outcome = "FOUND"
                with lock:
                    tally.findings.append(f"{exc} (reproduce: scripts/fuzz.py --targets {name} "
                                          f"--seed {round_seed} --cases {args.cases} --seconds 1)")
            except Exception as exc:  # the fuzzer's own trouble is reported, not hidden
                outcome = "ERROR"
                with lock:
                    tally.findings.append(f"{name} seed {round_seed}: fuzzer error {type(exc).__name__}: {exc}")
            print(f"  {name} seed {round_seed}: {outcome} in {time.monotonic() - started:.1f} s", flush=True)
            if not args.keep:
                shutil.rmtree(workdir / f"{name}-{round_seed}", ignore_errors=True)
            round_seed += 1

    with ThreadPoolExecutor(len(targets)) as pool:
        list(pool.map(run_target, targets))
    print(tally.report())
    if not args.keep and not tally.findings:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"work folder kept: {workdir}")
    return 1 if tally.findings else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
