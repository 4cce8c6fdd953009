#!/usr/bin/env python3
"""Panel page loads on a large store: p50/p95 server time per page and JSON endpoint.

Seeds N memories through the memory service (memorize_many, no queue) with what the workers
would have made — an atom each (types, states, deadlines, reinforcements, superseded chains),
graph output built from that atom (fact, person and topic nodes, edges, an entry naming the
atom), document and graph-entry vectors (random unit vectors in the default model's space) —
marks the stages done, leaves a few failed and retrying. Then starts a real `aokun panel`
process and loads every page and endpoint `--loads` times over loopback.

Time is the server's: the Server-Timing header of aokun_panel/timing.py (from the request's
arrival to the start of the response: reads and template rendering), put around the app by
the launcher below when the panel does not send it by itself. Without it the client's round
trip would be used (the table says which clock; httpx's keep-alive adds ~40 ms on loopback
that curl and browsers do not see). A page that does not exist yet (404) is listed as
missing, one that fails as broken. The target is under 300 ms per page load.

    .venv/bin/python scripts/bench_panel.py [--size 100000] [--loads 20] [--work DIR]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path
from urllib.parse import urlencode

import httpx
import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_recall_speed import MODEL, PERSONAS, _unit, corpus, seed_sql  # noqa: E402
from shared.config import load_config  # noqa: E402
from shared.store import open_store  # noqa: E402
from shared.store.model.atoms import ATOM_TYPES, AtomOwner, AtomRow  # noqa: E402
from shared.store.model.documents import MemoryFields  # noqa: E402
from shared.store.model.graph import EdgeSpec, EntrySpec, MemoryGraph, NodeSpec  # noqa: E402
from shared.store.model.vectors import VectorRow  # noqa: E402
from shared.text.segment import Segmenter  # noqa: E402

BIN = Path(sys.executable).parent
TARGET_MS = 300.0
DAY = 86_400.0
BATCH = 2000
# (state, share): most atoms active, the rest spread over the lifecycle.
ATOM_STATES = (("active", 0.80), ("expired", 0.08), ("forgotten", 0.05), ("superseded", 0.04),
               ("dormant", 0.03))


def pages(memory_id: int, persona: str, query: str) -> list[tuple[str, str]]:
    """(name, path) of every page load and read endpoint the panel's pages use."""
    return [
        ("overview", "/"), ("overview data", "/api/overview"),
        ("settings", "/settings"), ("settings data", "/api/settings"),
        ("memories", "/memories"), ("memories, page 200", "/memories?page=200"),
        ("memories, one persona", f"/memories?persona={persona}"),
        ("memories, archived", "/memories?state=archived"),
        ("memories, time range", "/memories?since=2025-01-01&until=2025-01-31"),
        ("memories, search", "/memories?" + urlencode({"q": query})),
        ("memory", f"/memories/{memory_id}"),
        ("atoms", "/atoms"), ("atoms, planned", "/atoms?type=planned"),
        ("atoms, superseded", "/atoms?state=superseded"),
        ("atoms, one persona, page 20", f"/atoms?persona={persona}&page=20"),
        ("atoms counts", "/api/atoms/counts"),
        ("graph", f"/graph?persona={persona}"), ("graph data", f"/api/graph?persona={persona}"),
        ("queue", "/queue"), ("queue data", "/api/queue"),
        ("forgetting", "/forgetting"),
        ("forgetting: decay curve", "/api/forgetting/curve?importance=0.7&accesses=3"),
        ("forgetting: atom curves", "/api/forgetting/atoms?importance=0.5&reinforcements=2"),
    ]


def node_pages(client: httpx.Client, persona: str) -> list[tuple[str, str]]:
    """The graph's side panel for its most connected node and for a fact node, if the graph
    page exists."""
    response = client.get(f"/api/graph?persona={persona}")
    if response.status_code != 200:
        return []
    data = response.json()
    nodes = sorted(data.get("nodes", []), key=lambda n: -n["degree"])
    # The figure the "graph data" row is timed at (capped at the page's 3,000 nodes).
    relations = sum(1 for edge in data.get("edges", []) if edge[2] == "relation")
    print(f"graph data for {persona}: {len(nodes)} of {data.get('total')} nodes, "
          f"{len(data.get('edges', []))} edges ({relations} relations)")
    picks = [("graph node: most connected", nodes[:1]),
             ("graph node: a fact", [n for n in nodes if n["type"] == "fact"][:1])]
    return [(name, f"/api/graph/node/{found[0]['id']}") for name, found in picks if found]


# On demand, not page loads: timed and reported apart.
ACTIONS = [("queue: check missing outputs (doctor's full scan)", "/api/queue/missing")]


# -- seeding ---------------------------------------------------------------------------------

def write_bench_config(work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump({"storage": {"data_dir": "data"}, "worker": {"autostart": False}}))
    return path


def seed(config_path: Path, size: int) -> None:
    from shared.assembly import Services
    from shared.live_config import LiveConfig

    config = load_config(config_path)
    store = open_store(config.storage)
    segmenter = Segmenter(config.text)
    service = Services(LiveConfig(config), store, queued=False).memories
    have = store.documents.stats()["total"]
    if have >= size:
        store.close()
        return
    rows, _ = corpus()
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    now = time.time()
    while have < size:
        n = min(BATCH, size - have)
        items = [_memory(rows[(have + i) % len(rows)], have + i, rng, now) for i in range(n)]
        ids = service.memorize_many(items)
        doc_vectors, entry_vectors = _unit(rng, n), _unit(rng, n)
        shortcuts: list[tuple[str, tuple]] = []
        with store.write() as tx:
            previous_atom = None
            for j, (memory_id, (content, fields)) in enumerate(zip(ids, items)):
                previous_atom = _derived(tx, segmenter, memory_id, have + j, content, fields,
                                         previous_atom, doc_vectors[j], entry_vectors[j], rng, now,
                                         shortcuts)
        seed_sql(config.storage, [
            *shortcuts,
            ("UPDATE memory_stages SET status = 'done', attempts = 1 WHERE memory_id >= ?", (ids[0],)),
            ("UPDATE documents SET archived = 1 WHERE id >= ? AND id % 13 = 0", (ids[0],))])
        have += n
        print(f"\r  seeded {have}/{size} ({time.perf_counter() - started:.0f} s)", end="", flush=True)
    print()
    store.close()
    _troubles(config.storage, now)


def _memory(row: dict, i: int, rng, now: float) -> tuple[str, MemoryFields]:
    from datetime import datetime, timezone

    when = datetime.fromtimestamp(now - float(rng.uniform(0, 365)) * DAY, tz=timezone.utc)
    return (f"{row['content']} #{i}", MemoryFields(
        persona_id=f"p{i % PERSONAS}", session_id=f"s{i // 20}",
        participants=tuple(row.get("participants") or ()), importance=round(float(rng.uniform(0.1, 0.9)), 2),
        pinned=i % 97 == 0, original_time=when))


def _derived(tx, segmenter: Segmenter, memory_id: int, i: int, content: str, fields: MemoryFields,
             previous_atom: int | None, doc_vector, entry_vector, rng, now: float,
             shortcuts: list[tuple[str, tuple]]) -> int:
    """The atom, graph output and vectors the workers would have stored; return the atom id.
    An atom's state no worker reaches in one step is added to `shortcuts`."""
    text = content.split("] ", 1)[-1][:160]
    tokens = " ".join(segmenter.terms(text))
    atom_type = ATOM_TYPES[i % len(ATOM_TYPES)]
    deadline = now + float(rng.uniform(-5, 30)) * DAY if atom_type == "planned" else None
    owner = AtomOwner(memory_id, fields.persona_id, fields.session_id, fields.importance, "seed")
    state = str(rng.choice([s for s, _ in ATOM_STATES], p=[p for _, p in ATOM_STATES]))
    # Expired and superseded atoms were active first and keep their search rows; forgotten
    # and dormant (reinforcement provenance) ones have none.
    stored_as = state if state in ("forgotten", "dormant") else "active"
    superseded_by = previous_atom if state in ("superseded", "dormant") else None
    atom_id = tx.atoms.insert(owner, AtomRow(atom_type, text, tokens, 0.7, deadline=deadline,
                                             ttl_days=30.0 * (1 + i % 7)), now - float(rng.uniform(0, 60)) * DAY,
                              state=stored_as, superseded_by=superseded_by)
    if state != stored_as:
        shortcuts.append(("UPDATE memory_atoms SET state = ?, superseded_by = ? WHERE id = ?",
                          (state, superseded_by, atom_id)))
    if i % 10 == 0:
        tx.atoms.set_reinforcement(atom_id, 1 + i % 4, 0.8, 60.0, now, restart=False)
    fact = NodeSpec("fact", text[:80], text[:80].lower())
    people = [NodeSpec("person", p, p.lower()) for p in fields.participants]
    topics = [NodeSpec("topic", w, w) for w in segmenter.terms(text)[:2]]
    edges = [EdgeSpec(n, fact, "describes", 0.8) for n in people + topics]
    edges += [EdgeSpec(a, b, "co_occurs_with", 0.6) for a in people for b in topics]
    edges += [EdgeSpec(a, b, "relation", 0.7, relation="friend") for a, b in pairwise(people)]
    entry = f"Fact: {text}"
    memory_graph = MemoryGraph(nodes=[fact, *people, *topics], edges=edges, entries=[
        EntrySpec(entry, " ".join(segmenter.terms(entry)), fact, 0.8, atom_id=atom_id)])
    entry_ids = tx.graph.replace_for_memory(memory_id, fields.persona_id, memory_graph, "seed", now)
    tx.vectors.upsert(VectorRow("document", memory_id, memory_id, MODEL, doc_vector, "seed"), now)
    tx.vectors.upsert(VectorRow("graph_entry", entry_ids[0], memory_id, MODEL, entry_vector, "seed"), now)
    return atom_id


def _troubles(storage, now: float) -> None:
    """A few failed and retrying stages, so the queue page has rows to show."""
    seed_sql(storage, [
        ("UPDATE memory_stages SET status = 'failed', attempts = 8, update_time = ?,"
         " last_error = 'EmbeddingError: the API answered 503' WHERE stage = 'embed' AND memory_id % 4001 = 1",
         (now,)),
        ("UPDATE memory_stages SET status = 'pending', attempts = 2, next_attempt_time = ?,"
         " last_error = 'StorageError: database is locked' WHERE stage = 'graph' AND memory_id % 9001 = 2",
         (now + 600,))])


# -- the panel -------------------------------------------------------------------------------

# `aokun panel`, with aokun_panel/timing.py's Server-Timing header around the app when the
# panel does not send one by itself.
LAUNCH = """
import sys
import aokun_panel.app as app
from aokun_panel.main import main
from aokun_panel.timing import ServerTiming
if "ServerTiming" not in vars(app):
    build = app.build_app
    app.build_app = lambda *args: ServerTiming(build(*args))
sys.exit(main(sys.argv[1:]))
"""


def start_panel(config: Path, port: int) -> tuple[subprocess.Popen, str]:
    log = open(config.parent / "panel.log", "w")
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "--config", str(config), "--port", str(port),
                             "--no-browser"], stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"/\?token=(\S+)", (config.parent / "panel.log").read_text())
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the panel did not start: {(config.parent / 'panel.log').read_text()}")


def load(client: httpx.Client, path: str) -> tuple[int, float, float | None, int]:
    """(status, client ms, server ms or None, bytes)."""
    started = time.perf_counter()
    response = client.get(path)
    client_ms = 1000 * (time.perf_counter() - started)
    # A page may time itself too; the outermost (largest) measure is the whole server time.
    found = re.findall(r"app;dur=([\d.]+)", response.headers.get("server-timing", ""))
    return response.status_code, client_ms, max(map(float, found)) if found else None, len(response.content)


def measure(client: httpx.Client, name: str, path: str, loads: int) -> dict:
    try:
        status, first_ms, first_server, size = load(client, path)
    except httpx.HTTPError as exc:
        return {"name": name, "path": path, "missing": False, "broken": f"{type(exc).__name__}: {exc}"}
    if status == 404:
        return {"name": name, "path": path, "missing": True}
    if status >= 500:
        return {"name": name, "path": path, "missing": False, "broken": f"HTTP {status}"}
    runs = [load(client, path) for _ in range(loads)]
    server = [r[2] for r in runs if r[2] is not None]
    times = server if len(server) == len(runs) else [r[1] for r in runs]
    q = statistics.quantiles(times, n=100, method="inclusive") if len(times) > 1 else [times[0]] * 99
    return {"name": name, "path": path, "missing": False, "status": status, "bytes": size,
            "first": first_server if first_server is not None else first_ms,
            "p50": q[49], "p95": q[94], "clock": "server" if times is server else "client"}


def report(results: list[dict]) -> None:
    print(f"{'page':<44} {'status':>6} {'first':>8} {'p50':>8} {'p95':>8}  clock   KB")
    for r in results:
        if r["missing"]:
            print(f"{r['name']:<44} {'404':>6}  missing (no such page yet): {r['path']}")
            continue
        if "broken" in r:
            print(f"{r['name']:<44}  broken: {r['broken']} (see panel.log): {r['path']}")
            continue
        flag = "  OVER" if r["p95"] > TARGET_MS else ""
        print(f"{r['name']:<44} {r['status']:>6} {r['first']:>7.1f}  {r['p50']:>7.1f}  {r['p95']:>7.1f}"
              f"  {r['clock']:<6} {r['bytes'] / 1024:>5.0f}{flag}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--loads", type=int, default=20, help="timed loads per page (after one untimed)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/aokun-bench-panel"),
                        help="store folder, kept and reused by the next run of the same size")
    parser.add_argument("--port", type=int, default=8791)
    args = parser.parse_args()
    config = write_bench_config(args.work)
    print(f"store: {args.work} ({args.size} memories)")
    seed(config, args.size)
    db_path = load_config(config).storage.db_path
    print(f"database: {db_path.stat().st_size / 2**20:.0f} MB")
    proc, token = start_panel(config, args.port)
    try:
        base = f"http://127.0.0.1:{args.port}"
        with httpx.Client(base_url=base, timeout=120) as client:
            client.get(f"/?token={token}")  # sets the cookie
            middle = args.size // 2 + 1
            urls = pages(middle, "p0", "what does Caroline do on weekends") + node_pages(client, "p0")
            results = [measure(client, name, path, args.loads) for name, path in urls]
            actions = [measure(client, name, path, 3) for name, path in ACTIONS]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    print(f"\n{args.loads} loads per page; ms; target p95 < {TARGET_MS:.0f} ms server time")
    report(results)
    print("\non demand (not page loads):")
    report(actions)
    return 1 if any("p95" in r and r["p95"] > TARGET_MS for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
