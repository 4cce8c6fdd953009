"""Full text on PostgreSQL ranks as SQLite FTS5 does (shared/store/postgres/fulltext.py).

Every test builds the same rows in an FTS5 table made by the SQLite schema's own DDL and in
fulltext's tables on a real PostgreSQL database, then asks both the same queries: the same
rows must come back with the same -bm25() (relative 1e-9) in the same order. The tokenizer
(fts_tokens.py) is checked against FTS5 tables it did not build: per-row token counts from
FTS5's docsize records, per-term counts from fts5vocab, adjacency through phrase MATCH.
"""

from __future__ import annotations

import json
import math
import random
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from servers import pg_url  # noqa: F401 (the fixture)
from shared.store.model.fulltext import scope_tokens
from shared.store.postgres import fts_tokens, fulltext
from shared.store.sqlite.match import any_of, scoped
from shared.store.sqlite.schema import MIGRATIONS

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench" / "data"
EN = ["run", "running", "runs", "runner", "connection", "connected", "connecting", "happy",
      "happiness", "alice", "bob", "lyon", "paris", "dentist", "appointment", "quokka", "fact",
      "cafe", "café", "naïve", "résumé", "jalapeño", "generalizations", "caresses", "ponies"]
ZH = ["中文", "词语", "测试", "北京", "上海", "晚会", "圣诞节", "开心", "学校", "比赛", "第一名",
      "魔术", "表演", "紧张", "深呼吸", "中华人民共和国", "人民", "共和国"]
ODD = ["3.5", "covid-19", "don't", "new york", "a.b.c", "2023-12-25", "x86_64", "ｆｕｌｌ",
       "ΑΘΗΝΑ", "москва", "😀", "!!!", "  ", "e-mail", "o'clock", "a a", "run run"]
PERSONAS = ["alice", "bob", "carol", "dave"]
SESSIONS = ["s1", "s2", "s3", "s4", "s5", "s6"]


def _schema_ddl(table: str) -> str:
    """The newest CREATE of an FTS5 table in the SQLite migrations (the one in use)."""
    found = [s for m in MIGRATIONS for s in m.statements
             if s.strip().startswith(f"CREATE VIRTUAL TABLE {table} ")]
    return found[-1]


class Pair:
    """The same full-text rows in SQLite FTS5 and in fulltext's PostgreSQL tables."""

    def __init__(self, pg, index: str = "documents"):
        self.pg, self.index = pg, index
        self.table = {"documents": "documents_fts", "atoms": "atoms_fts"}[index]
        self.lite = sqlite3.connect(":memory:")
        self.lite.execute(_schema_ddl(self.table))

    def add(self, row_id, tokens, context="", persona=None, session=None):
        if self.index == "documents":
            columns = (tokens, context, scope_tokens(persona, session))
            self.lite.execute("INSERT INTO documents_fts (rowid, tokens, context, scope) VALUES (?, ?, ?, ?)",
                              (row_id, *columns))
        else:
            columns = (tokens,)
            self.lite.execute(f"INSERT INTO {self.table} (rowid, tokens) VALUES (?, ?)", (row_id, tokens))
        fulltext.add_row(self.pg, self.index, row_id, columns, persona, session)

    def remove(self, ids):
        for i in ids:
            self.lite.execute(f"DELETE FROM {self.table} WHERE rowid = ?", (i,))
        return fulltext.remove_rows(self.pg, self.index, ids)

    def set_context(self, row_id, context):
        self.lite.execute("UPDATE documents_fts SET context = ? WHERE rowid = ?", (context, row_id))
        fulltext.set_column(self.pg, "documents", row_id, 1, context)

    def sqlite(self, terms, weight=1.0, persona=None, session=None):
        match = scoped(any_of(terms), "scope", persona, session) if self.index == "documents" else any_of(terms)
        if match is None:
            return []
        rank = "-bm25(documents_fts, 1.0, ?, 0.0)" if self.index == "documents" else f"-bm25({self.table}) + 0 * ?"
        return self.lite.execute(f"SELECT rowid, {rank} AS raw FROM {self.table} WHERE {self.table} MATCH ?"
                                 " ORDER BY raw DESC, rowid", (weight, match)).fetchall()

    def postgres(self, terms, weight=1.0, personas=None, session=None):
        subquery, params = fulltext.ranked(self.index, terms, (1.0, weight, 0.0), personas, session)
        statement = sql.SQL("SELECT s.row_id, s.raw FROM ({}) s ORDER BY s.raw DESC, s.row_id LIMIT %s")
        return self.pg.execute(statement.format(subquery), [*params, 100000]).fetchall()

    def check(self, terms, weight=1.0, persona=None, session=None):
        """Both engines agree on rows, scores and order; returns how many rows matched."""
        lite = self.sqlite(terms, weight, persona, session)
        pg = self.postgres(terms, weight, None if persona is None else [persona], session)
        want = dict(lite)
        assert sorted(want) == sorted(i for i, _ in pg), (terms, persona, session)
        for row_id, raw in pg:
            assert math.isclose(raw, want[row_id], rel_tol=1e-9, abs_tol=1e-12), (terms, row_id, raw, want[row_id])
        for (a, _), (b, _) in pairwise(pg):  # PostgreSQL's order is SQLite's (up to exact ties)
            assert want[a] >= want[b] - 1e-9 * abs(want[b]), (terms, a, b)
        return len(pg)


@pytest.fixture
def pg(pg_url):
    with psycopg.connect(pg_url) as conn:
        for statement in fulltext.DDL:
            conn.execute(statement)
        yield conn
        conn.rollback()


def _words(rng, n):
    return [rng.choice(EN + ZH + ODD[:10]) for _ in range(n)]


def _corpus(pair, rng, n=300):
    for row_id in range(1, n + 1):
        session = rng.choice(SESSIONS + [None])
        persona = rng.choice(PERSONAS + [None]) if session is None else PERSONAS[SESSIONS.index(session) % 4]
        context = " ".join(_words(rng, rng.choice([0, 0, 5, 20])))
        pair.add(row_id, " ".join(_words(rng, rng.randint(1, 40))), context, persona, session)


def _queries(rng, n):
    for _ in range(n):
        terms = [rng.choice(EN + ZH + ODD + ["absent", "不存在"]) for _ in range(rng.randint(1, 8))]
        if rng.random() < 0.3:
            terms.append(rng.choice(terms))  # a repeated term counts twice, as in FTS5
        yield terms


def test_documents_rank_as_fts5_in_every_scope_and_weight(pg):
    pair, rng = Pair(pg), random.Random(7)
    _corpus(pair, rng)
    matched = 0
    for terms in _queries(rng, 120):
        for weight in (0.0, 0.5, 1.0, 0.3):
            matched += pair.check(terms, weight)
        matched += pair.check(terms, 0.5, persona=rng.choice(PERSONAS))
        matched += pair.check(terms, 0.5, session=rng.choice(SESSIONS))
        matched += pair.check(terms, 1.0, persona="alice", session="s1")
    assert matched > 3000  # the queries did find rows


def test_phrases_repeats_absent_and_empty_terms(pg):
    pair = Pair(pg)
    pair.add(1, "new york is big 3.5 don't stop", "york new", "alice")
    pair.add(2, "york new 3 5 don t", "", "alice")
    pair.add(3, "run run run a a a", "new york", "bob")
    pair.add(4, "中华人民共和国 中华 人民", "new", None, "s1")
    for terms in (["new york"], ["3.5"], ["don't"], ["a a"], ["run run"], ["new york", "new york"],
                  ["york", "york", "new york"], ["absent"], ["!!!"], ["😀", "run"], ["", "new"],
                  ["人民", "中华人民共和国", "人民"], []):
        for weight in (0.0, 0.5, 1.0):
            pair.check(terms, weight)
            pair.check(terms, weight, persona="alice")
    assert [r for r, _ in pair.postgres(["new york"])] in ([1, 3], [3, 1])
    assert pair.postgres(["!!!"]) == [] and pair.postgres(["absent"]) == []


def test_deletes_and_context_updates_keep_scores_and_leave_no_word(pg):
    pair, rng = Pair(pg), random.Random(11)
    _corpus(pair, rng, 200)
    pair.add(500, "zebra quokka", "unicorn", "alice", "s1")
    assert pair.remove([500, 999]) == 1
    for table in ("fulltext_postings", "fulltext_terms"):
        assert pg.execute(f"SELECT count(*) FROM {table} WHERE term IN ('zebra', 'unicorn')").fetchone()[0] == 0
    ids = rng.sample(range(1, 201), 60)
    assert pair.remove(ids[:40]) == 40
    for row_id in ids[40:]:
        pair.set_context(row_id, " ".join(_words(rng, rng.randint(0, 15))))
    pair.set_context(999, "nothing here")  # no row: nothing, as an FTS5 UPDATE
    for terms in _queries(rng, 60):
        pair.check(terms, 0.5)
        pair.check(terms, 1.0, persona=rng.choice(PERSONAS))
    _assert_statistics_match(pair)
    pair.remove(list(range(1, 201)))
    assert all(pg.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0 for t in fulltext.TABLES[1:])
    assert fulltext.rows_count(pg, "documents") == 0


def _assert_statistics_match(pair):
    """N, total length and every term's row count are FTS5's (fts5vocab 'row')."""
    lite = pair.lite
    lite.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, 'documents_fts', 'row')")
    want = dict(lite.execute("SELECT term, doc FROM temp.vocab"))
    got = dict(pair.pg.execute("SELECT term, rows FROM fulltext_terms WHERE idx = 1"))
    assert got == want
    rows, tokens = pair.pg.execute("SELECT rows, tokens FROM fulltext_stats WHERE idx = 1").fetchone()
    assert rows == lite.execute("SELECT count(*) FROM documents_fts").fetchone()[0]
    assert tokens == sum(sum(_docsize(blob)) for (blob,) in lite.execute("SELECT sz FROM documents_fts_docsize"))


def test_atoms_index_ranks_as_fts5_and_reads_back(pg):
    pair, rng = Pair(pg, "atoms"), random.Random(5)
    for row_id in range(1, 150):
        pair.add(row_id, " ".join(_words(rng, rng.randint(1, 12))), persona=rng.choice(PERSONAS))
    for terms in _queries(rng, 80):
        pair.check(terms)
    assert fulltext.rows_count(pg, "atoms") == 149 and fulltext.has_row(pg, "atoms", 3)
    assert not fulltext.has_row(pg, "documents", 3)
    assert fulltext.row_ids_among(pg, "atoms", [1, 2, 500]) == {1, 2}
    assert fulltext.stored_columns(pg, "atoms", [1])[1][0] == pair.lite.execute(
        "SELECT tokens FROM atoms_fts WHERE rowid = 1").fetchone()[0]
    with pytest.raises(ValueError):
        fulltext.add_row(pg, "atoms", 1000, ("a", "b"))


def test_several_personas_are_the_union_of_each(pg):
    pair, rng = Pair(pg), random.Random(3)
    _corpus(pair, rng, 150)
    for terms in _queries(rng, 30):
        union = sorted(pair.postgres(terms, 0.5, ["alice", "bob"]), key=lambda r: r[0])
        each = sorted(pair.postgres(terms, 0.5, ["alice"]) + pair.postgres(terms, 0.5, ["bob"]))
        assert union == each
        assert pair.postgres(terms, 0.5, []) == []


# -- the tokenizer ----------------------------------------------------------------------------

RANGES = [(0x20, 0x7e), (0xa0, 0x24f), (0x300, 0x36f), (0x370, 0x3ff), (0x400, 0x4ff),
          (0x590, 0x6ff), (0xe00, 0xe7f), (0x1e00, 0x1eff), (0x2000, 0x206f), (0x3000, 0x303f),
          (0x3040, 0x30ff), (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0xff00, 0xffef),
          (0x1f300, 0x1f64f), (0x1d400, 0x1d7ff), (0x660, 0x669), (0x20000, 0x2a6df)]


def _random_text(rng):
    parts = []
    for _ in range(rng.randint(1, 30)):
        if rng.random() < 0.5:
            parts.append(rng.choice(EN + ZH + ODD).upper() if rng.random() < 0.2 else rng.choice(EN + ZH + ODD))
        else:
            lo, hi = rng.choice(RANGES)
            parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 12))))
    if rng.random() < 0.05:
        parts.append("x" * rng.randint(60, 3000) + "ing")  # long tokens: porter passes them by
    return rng.choice([" ", "", "\t", "\u3000", "-"]).join(parts)


def _bench_texts():
    texts = []
    for path in sorted(BENCH.glob("*.memories.jsonl")) if BENCH.is_dir() else []:
        texts += [json.loads(line)["content"] for line in path.read_text(encoding="utf-8").splitlines()]
    return texts


def _docsize(blob: bytes) -> list[int]:
    """FTS5's %_docsize record: one varint per column."""
    out, value = [], 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7f)
        if not byte & 0x80:
            out.append(value)
            value = 0
    return out


def _assert_tokenizer_parity(texts):
    lite = sqlite3.connect(":memory:")
    lite.execute(_schema_ddl("atoms_fts"))
    lite.executemany("INSERT INTO atoms_fts (rowid, tokens) VALUES (?, ?)", list(enumerate(texts, 1)))
    lite.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, 'atoms_fts', 'row')")
    tokens = fts_tokens.tokens_many(texts)
    sizes = dict(lite.execute("SELECT id, sz FROM atoms_fts_docsize"))
    counts: dict[str, list[int]] = {}
    for row_id, row in enumerate(tokens, 1):
        assert [len(row)] == _docsize(sizes[row_id]), texts[row_id - 1]
        for term in set(row):
            counts.setdefault(term, [0, 0])[0] += 1
        for term in row:
            counts[term][1] += 1
    assert counts == {t: [d, c] for t, d, c in lite.execute("SELECT term, doc, cnt FROM temp.vocab")}
    rng = random.Random(1)
    for row_id, row in rng.sample(list(enumerate(tokens, 1)), min(300, len(tokens))):
        k = rng.randrange(len(row) - 1) if len(row) >= 2 else None
        # Adjacent tokens are a phrase match of that row (when the stemmer leaves them be).
        if k is not None and fts_tokens.tokens_many(row[k:k + 2]) == [[t] for t in row[k:k + 2]]:
            phrase = '"' + " ".join(row[k:k + 2]).replace('"', '""') + '"'
            found = lite.execute("SELECT rowid FROM atoms_fts WHERE atoms_fts MATCH ?", (phrase,))
            assert row_id in {r for (r,) in found}


def test_tokens_are_fts5s_over_a_large_varied_corpus():
    rng = random.Random(42)
    _assert_tokenizer_parity([_random_text(rng) for _ in range(4000)])
    assert fts_tokens.tokens("Running CAFÉS naïve 中文 3.5 😀") == ["run", "cafe", "naiv", "中文", "3", "5"]
    assert fts_tokens.tokens("!!! 😀") == [] and fts_tokens.tokens_many([]) == []


def test_tokens_are_fts5s_over_the_bench_texts():
    texts = _bench_texts()
    if not texts:
        pytest.skip(f"no bench data at {BENCH}")
    _assert_tokenizer_parity(texts)


def test_threads_tokenize_on_their_own_databases():
    rng = random.Random(9)
    texts = [_random_text(rng) for _ in range(200)]
    want = fts_tokens.tokens_many(texts)
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(fts_tokens.tokens, texts)) == want
