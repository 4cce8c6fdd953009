#!/usr/bin/env python3
"""Benchmark: the cost of a delete that leaves no word behind (shared/store/sqlite/fts.py), at 100k.

Seeds documents and the three full-text tables (one document, one atom and one graph entry per
memory, jieba terms as the store writes them) from the LoCoMo / MADial texts in
../shared/bench/data, repeated with shifted time markers and one unique word per memory. Then
times deletes as the memory service does them — the rows, the scrub, COMMIT (synchronous=FULL),
the checkpoint — with a few new memories between deletes, and afterwards searches the
database and WAL files for the deleted memories' unique words.

    .venv/bin/python scripts/bench_delete.py [--memories 100000] [--deletes 30]
        [--scrub fts|none|merge] [--driver sqlite3|pysqlite3]

--scrub fts: fts.scrub_terms ('optimize' on SQLite < 3.44, in-place 'secure-delete' from 3.44).
--scrub none: a plain delete, for comparison. --scrub merge: an incremental FTS5 'merge' of
--merge-pages pages per table, the cheap option that does not guarantee removal.
--driver pysqlite3 runs everything on the SQLite bundled in pysqlite3-binary (if installed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.config import StorageConfig, TextConfig  # noqa: E402
from shared.store import open_store  # noqa: E402
from shared.store.sqlite import fts  # noqa: E402
from shared.text.segment import Segmenter  # noqa: E402

BENCH = ROOT.parent / "shared" / "bench" / "data"
MARKER = re.compile(r"^\[[^\]]*\]\s*")


def texts() -> list[str]:
    out = []
    for name in ("locomo_dev", "madial_zh_dev", "madial_en_dev", "locomo_session_dev"):
        path = BENCH / f"{name}.memories.jsonl"
        if path.exists():
            out += [MARKER.sub("", json.loads(line)["content"]) for line in path.open(encoding="utf-8")]
    if not out:
        sys.exit(f"no benchmark texts in {BENCH}")
    return out


def unique_word(i: int) -> str:
    """'zq' + 20 hex digits + 'x' (porter leaves it whole); its middle is the needle."""
    return f"zq{hashlib.sha1(str(i).encode()).hexdigest()[:20]}x"


def needle(i: int) -> bytes:
    # Past any prefix shared with a neighbouring term (FTS5 stores terms prefix-compressed).
    return unique_word(i)[12:21].encode()


class Corpus:
    def __init__(self):
        self.segmenter = Segmenter(TextConfig())
        self.texts = texts()
        self.terms = [" ".join(self.segmenter.terms(t)) for t in self.texts]

    def memory(self, i: int) -> tuple[str, str]:
        """(stored text, index tokens) of memory i: a base text, a time marker, a unique word."""
        base = i % len(self.texts)
        stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime(1_600_000_000 + i * 2_111))
        tokens = f"{stamp.replace('-', ' ').replace(':', ' ')} {self.terms[base]} {unique_word(i)}"
        return f"[{stamp}] {self.texts[base]} {unique_word(i)}", tokens


def connect(driver: str, path: Path):
    if driver == "pysqlite3":
        from pysqlite3 import dbapi2 as module
    else:
        import sqlite3 as module
    conn = module.connect(str(path), isolation_level=None, timeout=10)
    conn.execute("PRAGMA synchronous = FULL")
    fts.configure_connection(conn)
    return conn


def insert(conn, corpus: Corpus, ids) -> None:
    for i in ids:
        text, tokens = corpus.memory(i)
        conn.execute("INSERT INTO documents (id, text, content_hash, create_time, update_time)"
                     " VALUES (?, ?, ?, 0, 0)", (i, text, hashlib.sha256(text.encode()).hexdigest()[:32]))
        for table, row_tokens in (("documents_fts", tokens), ("atoms_fts", tokens),
                                  ("graph_entries_fts", f"fact {tokens} summary {tokens}")):
            conn.execute(f"INSERT INTO {table} (rowid, tokens) VALUES (?, ?)", (i, row_tokens))


def delete(conn, memory_id: int, scrub: str, merge_pages: int) -> tuple[float, float]:
    """One delete as the memory service does it; (ms to commit, ms to checkpoint)."""
    started = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    for table in fts.FTS_TABLES:
        conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (memory_id,))
    conn.execute("DELETE FROM documents WHERE id = ?", (memory_id,))
    if scrub == "fts":
        fts.scrub_terms(conn, fts.FTS_TABLES)
    elif scrub == "merge":  # negative: merge even levels with fewer than 'usermerge' segments
        for table in fts.FTS_TABLES:
            conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('merge', ?)", (-merge_pages,))
    conn.execute("COMMIT")
    committed = time.perf_counter()
    fts.flush_deleted(conn)
    return (committed - started) * 1000, (time.perf_counter() - committed) * 1000


def sizes(conn, data_dir: Path) -> str:
    index = {t: conn.execute(f"SELECT SUM(LENGTH(block)) FROM {t}_data").fetchone()[0] / 1e6
             for t in fts.FTS_TABLES}
    wal = data_dir / "aokun.db-wal"
    return (f"db {(data_dir / 'aokun.db').stat().st_size / 1e6:.0f} MB, wal "
            f"{wal.stat().st_size / 1e6 if wal.exists() else 0:.1f} MB, index "
            + ", ".join(f"{t} {mb:.1f} MB" for t, mb in index.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--deletes", type=int, default=30)
    parser.add_argument("--between", type=int, default=5, help="new memories between deletes")
    parser.add_argument("--scrub", choices=("fts", "none", "merge"), default="fts")
    parser.add_argument("--merge-pages", type=int, default=64)
    parser.add_argument("--driver", choices=("sqlite3", "pysqlite3"), default="sqlite3")
    parser.add_argument("--data-dir", type=Path, help="default: a temporary folder")
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="aokun-bench-delete-"))
    open_store(StorageConfig(data_dir=data_dir)).close()  # the real schema
    corpus = Corpus()
    conn = connect(args.driver, data_dir / "aokun.db")
    version = ".".join(map(str, fts.library_version(conn)))
    started = time.perf_counter()
    for start in range(1, args.memories + 1, 2_000):
        conn.execute("BEGIN IMMEDIATE")
        insert(conn, corpus, range(start, min(start + 2_000, args.memories + 1)))
        conn.execute("COMMIT")
    fts.flush_deleted(conn)
    print(f"SQLite {version}, {args.memories} memories seeded in {time.perf_counter() - started:.0f} s; "
          + sizes(conn, data_dir))
    doomed = [1 + (k * 7_919) % args.memories for k in range(args.deletes)]
    timings, next_id = [], args.memories + 1
    for memory_id in doomed:
        conn.execute("BEGIN IMMEDIATE")
        insert(conn, corpus, range(next_id, next_id + args.between))
        conn.execute("COMMIT")
        next_id += args.between
        timings.append(delete(conn, memory_id, args.scrub, args.merge_pages))
    total = sorted(a + b for a, b in timings)
    commit, flush = sorted(a for a, _ in timings), sorted(b for _, b in timings)

    def pct(values, q):
        return values[min(len(values) - 1, int(q * len(values)))]

    print(f"--scrub {args.scrub}: {len(total)} deletes, ms per delete p50 {pct(total, .5):.0f} "
          f"p95 {pct(total, .95):.0f} max {total[-1]:.0f} (first {timings[0][0] + timings[0][1]:.0f}); "
          f"to commit p50 {statistics.median(commit):.0f}, checkpoint p50 {statistics.median(flush):.0f}")
    print("after: " + sizes(conn, data_dir))
    files = [p.read_bytes() for p in (data_dir / "aokun.db", data_dir / "aokun.db-wal") if p.exists()]
    leaked = sum(any(needle(i) in f for f in files) for i in doomed)
    kept = [i for i in range(2, 2 + len(doomed)) if i not in doomed]
    found = sum(any(needle(i) in f for f in files) for i in kept)
    print(f"deleted memories whose unique word is still in the files: {leaked} of {len(doomed)} "
          f"(control: kept memories found {found} of {len(kept)})")
    print(f"data: {data_dir}")


if __name__ == "__main__":
    main()
