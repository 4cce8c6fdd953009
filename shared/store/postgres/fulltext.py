"""Full text on PostgreSQL, ranked exactly as SQLite FTS5's bm25() ranks it.

Recall must not depend on the engine, so this reproduces FTS5 rather than using PostgreSQL's
tsvector (other stemming, other ranking):
- terms: FTS5's own tokenizer makes them (fts_tokens.py), for rows and for query terms;
- postings: one row per (term, indexed row, column) with the term's positions there, keyed by
  persona and session (64-bit hashes, the same digest as match.scope_token, 0 = none) right
  after the term, so a scoped search reads only that scope's postings;
- statistics: N and the total length per index, and each term's document frequency, kept on
  every write, so a query never counts rows;
- bm25 (ext/fts5/fts5_aux.c, fts5Bm25Function): k1 = 1.2, b = 0.75, per phrase
  IDF = ln((N - n + 0.5) / (n + 0.5)) floored at 1e-6 when <= 0, N and n over the whole index,
  freq = the sum of the column weights of the phrase's instances in the row, D = the row's
  tokens in all columns, avgdl = total / N; score = sum over phrases in query order.
A query term FTS5 splits into several tokens is a phrase: its tokens must be adjacent in one
column (checked on the positions). A term without tokens matches nothing and adds nothing.

Functions take a psycopg 3 connection inside the caller's transaction; none commits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from shared.store.model.fulltext import MAX_QUERY_TERMS
from shared.store.postgres import fts_tokens

# index name -> (code stored in the tables, number of columns)
INDEXES = {"documents": (1, 3), "atoms": (2, 1), "graph_entries": (3, 1)}
TABLES = ("fulltext_stats", "fulltext_rows", "fulltext_terms", "fulltext_postings")

# stats: FTS5's N and total length per index; terms: each term's row count (FTS5's n);
# rows: per indexed row its scope keys, length D, column texts and distinct terms (to delete
# its postings by key); postings: a term's positions in one column of one row.
DDL: tuple[str, ...] = (
    "CREATE TABLE fulltext_stats (idx SMALLINT PRIMARY KEY, rows BIGINT NOT NULL, tokens BIGINT NOT NULL)",
    """
    CREATE TABLE fulltext_rows (
        idx SMALLINT NOT NULL,
        row_id BIGINT NOT NULL,
        persona_key BIGINT NOT NULL,
        session_key BIGINT NOT NULL,
        length INTEGER NOT NULL,
        columns TEXT[] NOT NULL,
        terms TEXT[] COLLATE "C" NOT NULL,
        PRIMARY KEY (idx, row_id)
    )
    """,
    "CREATE TABLE fulltext_terms (idx SMALLINT NOT NULL, term TEXT COLLATE \"C\" NOT NULL,"
    " rows BIGINT NOT NULL, PRIMARY KEY (idx, term))",
    """
    CREATE TABLE fulltext_postings (
        idx SMALLINT NOT NULL,
        term TEXT COLLATE "C" NOT NULL,
        persona_key BIGINT NOT NULL,
        session_key BIGINT NOT NULL,
        row_id BIGINT NOT NULL,
        col SMALLINT NOT NULL,
        positions INTEGER[] NOT NULL,
        PRIMARY KEY (idx, term, persona_key, session_key, row_id, col)
    )
    """,
)


def scope_key(value: str | None) -> int:
    """A persona's or session's key in the tables: the 64-bit digest match.scope_token puts in
    SQLite's scope column (as a signed BIGINT), so both engines scope by the same equality;
    0 when there is none."""
    if value is None:
        return 0
    digest = int.from_bytes(hashlib.sha1(value.encode("utf-8")).digest()[:8], "big")
    return digest - (1 << 64) if digest >= 1 << 63 else digest


def _index(index: str) -> tuple[int, int]:
    if index not in INDEXES:
        raise ValueError(f"{index!r} is not one of the full-text indexes {tuple(INDEXES)}")
    return INDEXES[index]


# -- writes -----------------------------------------------------------------------------------

_INSERT_ROW = """
WITH r AS (
    INSERT INTO fulltext_rows (idx, row_id, persona_key, session_key, length, columns, terms)
    VALUES (%(idx)s, %(row_id)s, %(persona)s, %(session)s, %(length)s, %(columns)s, %(terms)s)),
p AS (
    INSERT INTO fulltext_postings (idx, term, persona_key, session_key, row_id, col, positions)
    SELECT %(idx)s, u.term, %(persona)s, %(session)s, %(row_id)s, u.col, u.positions::integer[]
    FROM unnest(%(p_terms)s::text[], %(p_cols)s::smallint[], %(p_positions)s::text[])
        AS u(term, col, positions)),
t AS (
    INSERT INTO fulltext_terms (idx, term, rows) SELECT %(idx)s, u.term, 1
    FROM unnest(%(terms)s::text[]) AS u(term)
    ON CONFLICT (idx, term) DO UPDATE SET rows = fulltext_terms.rows + 1)
INSERT INTO fulltext_stats (idx, rows, tokens) VALUES (%(idx)s, 1, %(length)s)
ON CONFLICT (idx) DO UPDATE SET rows = fulltext_stats.rows + 1,
    tokens = fulltext_stats.tokens + EXCLUDED.tokens
"""


def add_row(conn: psycopg.Connection, index: str, row_id: int, columns: Sequence[str],
            persona_id: str | None = None, session_id: str | None = None) -> None:
    """Index a row (as an FTS5 INSERT: one row per id, every column tokenized), in one
    statement. A row already there is an error, as in FTS5: replace = remove_rows + add_row."""
    _insert(conn, index, row_id, list(columns), scope_key(persona_id), scope_key(session_id))


def _insert(conn: psycopg.Connection, index: str, row_id: int, columns: list[str], persona: int, session: int) -> None:
    """add_row by scope keys (set_column re-adds a row it read back): tokens grouped by
    (term, column) in sorted order, so concurrent writers lock term rows in one order."""
    code, width = _index(index)
    if len(columns) != width:
        raise ValueError(f"the {index} index has {width} columns, not {len(columns)}")
    postings: dict[tuple[str, int], list[int]] = {}
    length = 0
    for col, tokens in enumerate(fts_tokens.positions_many(columns)):
        length += len(tokens)
        for position, term in tokens:
            postings.setdefault((term, col), []).append(position)
    keys = sorted(postings)
    conn.execute(_INSERT_ROW, {
        "idx": code, "row_id": row_id, "persona": persona, "session": session,
        "length": length, "columns": columns, "terms": sorted({term for term, _ in keys}),
        "p_terms": [t for t, _ in keys], "p_cols": [c for _, c in keys],
        "p_positions": ["{" + ",".join(map(str, postings[k])) + "}" for k in keys]})


_REMOVE_ROWS = """
WITH gone AS (
    DELETE FROM fulltext_rows WHERE idx = %(idx)s AND row_id = ANY(%(ids)s)
    RETURNING row_id, persona_key, session_key, length, terms),
each AS (SELECT g.row_id, g.persona_key, g.session_key, unnest(g.terms) AS term FROM gone g),
p AS (
    DELETE FROM fulltext_postings p USING each e
    WHERE p.idx = %(idx)s AND p.term = e.term AND p.persona_key = e.persona_key
      AND p.session_key = e.session_key AND p.row_id = e.row_id),
c AS (SELECT term, count(*) AS n FROM each GROUP BY term),
t AS (
    UPDATE fulltext_terms t SET rows = t.rows - c.n FROM c
    WHERE t.idx = %(idx)s AND t.term = c.term AND t.rows > c.n),
z AS (
    DELETE FROM fulltext_terms t USING c
    WHERE t.idx = %(idx)s AND t.term = c.term AND t.rows <= c.n),
s AS (
    UPDATE fulltext_stats SET rows = rows - (SELECT count(*) FROM gone),
        tokens = tokens - (SELECT coalesce(sum(length), 0) FROM gone)
    WHERE idx = %(idx)s AND EXISTS (SELECT 1 FROM gone))
SELECT count(*) FROM gone
"""


def remove_rows(conn: psycopg.Connection, index: str, row_ids: Sequence[int]) -> int:
    """Drop rows with all their postings; a term no row holds any more leaves the term table.
    Returns how many rows there were."""
    code, _ = _index(index)
    if not row_ids:
        return 0
    counted = conn.execute(_REMOVE_ROWS, {"idx": code, "ids": list(row_ids)}).fetchone()
    assert counted is not None  # a SELECT of one count: always a row
    return counted[0]


def set_column(conn: psycopg.Connection, index: str, row_id: int, column: int, text: str) -> None:
    """Replace one column's text (documents' context), as FTS5's UPDATE does: the row is
    indexed again, so its length, postings and term counts follow. No row: nothing."""
    code, width = _index(index)
    if not 0 <= column < width:
        raise ValueError(f"the {index} index has no column {column}")
    row = conn.execute("SELECT columns, persona_key, session_key FROM fulltext_rows"
                       " WHERE idx = %s AND row_id = %s FOR UPDATE", (code, row_id)).fetchone()
    if row is None:
        return
    columns = list(row[0])
    columns[column] = text
    remove_rows(conn, index, [row_id])
    _insert(conn, index, row_id, columns, row[1], row[2])


# -- reads ------------------------------------------------------------------------------------


def has_row(conn: psycopg.Connection, index: str, row_id: int) -> bool:
    return conn.execute("SELECT 1 FROM fulltext_rows WHERE idx = %s AND row_id = %s",
                        (_index(index)[0], row_id)).fetchone() is not None


def row_ids_among(conn: psycopg.Connection, index: str, ids: Sequence[int]) -> set[int]:
    """Which of these ids have a full-text row (for missing_fts and consistency checks)."""
    return {r[0] for r in conn.execute(
        "SELECT row_id FROM fulltext_rows WHERE idx = %s AND row_id = ANY(%s)", (_index(index)[0], list(ids)))}


def stored_columns(conn: psycopg.Connection, index: str, ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    """The column texts as indexed (terms_of splits column 0 on spaces)."""
    return {r[0]: tuple(r[1]) for r in conn.execute(
        "SELECT row_id, columns FROM fulltext_rows WHERE idx = %s AND row_id = ANY(%s)",
        (_index(index)[0], list(ids)))}


def rows_count(conn: psycopg.Connection, index: str) -> int:
    """Rows in an index (FTS5's COUNT(*)), from the kept statistics."""
    row = conn.execute("SELECT rows FROM fulltext_stats WHERE idx = %s", (_index(index)[0],)).fetchone()
    return row[0] if row else 0


# -- ranking ----------------------------------------------------------------------------------

K1, B = 1.2, 0.75
_NOTHING = sql.SQL("SELECT NULL::bigint AS row_id, NULL::float8 AS raw WHERE false")


def _idf(hits: str) -> str:
    """FTS5's IDF of a phrase found in `hits` rows (a column: it is written twice), in
    fts5Bm25GetData's order of double operations."""
    x = f"ln(((st.n - ({hits}))::float8 + 0.5::float8) / (({hits})::float8 + 0.5::float8))"
    return f"(CASE WHEN {x} <= 0 THEN 1e-6::float8 ELSE {x} END)"


Scope = tuple[str, list[Any], str, list[Any]]  # FROM items, their params, conditions on postings p, theirs
EVERYWHERE: Scope = ("", [], "", [])


def _scope(personas: Sequence[str] | None, session_id: str | None) -> Scope:
    """The pushdown: persona keys as rows k(persona) that each lookup of postings joins by
    equality, and the session key, both right after the term in the primary key, so that
    every read of postings is an index range of the scope (a list in `= ANY` may be planned
    as a filter over all the term's postings instead)."""
    source, where = "", ""
    source_params: list[Any] = []
    params: list[Any] = []
    if personas is not None:
        source = " CROSS JOIN unnest(%s::bigint[]) AS k(persona)"
        source_params = [[scope_key(p) for p in personas]]
        where = " AND p.persona_key = k.persona"
    if session_id is not None:
        where += " AND p.session_key = %s"
        params.append(scope_key(session_id))
    return source, source_params, where, params


def _single_arm(code: int, single: list[tuple[int, str]], scope: Scope) -> tuple[str, list[Any]]:
    """(row_id, i, freq, idf) for every one-token phrase. Each term's postings are read by a
    lateral lookup on the primary key's prefix (idx, term, persona, session): OFFSET 0 keeps
    the planner from flattening it into a scan of the persona's postings of every term."""
    source, source_params, where, params = scope
    text = (
        "SELECT p.row_id, q.i, sum(cardinality(p.positions)::float8 * w.w[p.col + 1]) AS freq, q.idf"
        " FROM (SELECT u.term, u.i, " + _idf("coalesce(t.rows, 0)") + " AS idf"
        " FROM unnest(%s::text[], %s::int[]) AS u(term, i) CROSS JOIN st"
        " LEFT JOIN fulltext_terms t ON t.idx = %s AND t.term = u.term OFFSET 0) q" + source +
        " CROSS JOIN LATERAL (SELECT p.row_id, p.col, p.positions FROM fulltext_postings p"
        " WHERE p.idx = %s AND p.term = q.term" + where + " OFFSET 0) p"
        " CROSS JOIN w GROUP BY p.row_id, q.i, q.idf")
    return text, [[t for _, t in single], [i for i, _ in single], code, *source_params, code, *params]


def _phrase_matches(code: int, tokens: list[str], scope: Scope) -> tuple[str, list[Any]]:
    """(row_id, col, n): instances of a several-token phrase per row and column, where each
    token sits right after the one before (FTS5 phrases never span columns). The first
    token's postings in scope drive; the others are looked up by their whole primary key."""
    source, source_params, where, params = scope
    joins: list[str] = []
    tests: list[str] = []
    join_params: list[str] = []
    for k, token in enumerate(tokens[1:], 1):
        joins.append(f" CROSS JOIN LATERAL (SELECT p{k}.positions FROM fulltext_postings p{k}"
                     f" WHERE p{k}.idx = p0.idx AND p{k}.term = %s AND p{k}.persona_key = p0.persona_key"
                     f" AND p{k}.session_key = p0.session_key AND p{k}.row_id = p0.row_id"
                     f" AND p{k}.col = p0.col OFFSET 0) p{k}")
        tests.append(f"x.pos + {k} = ANY(p{k}.positions)")
        join_params.append(token)
    text = ("SELECT p0.row_id, p0.col, (SELECT count(*) FROM unnest(p0.positions) AS x(pos) WHERE "
            + " AND ".join(tests) + ") AS n FROM (SELECT 1) AS one" + source
            + " CROSS JOIN LATERAL (SELECT p.* FROM fulltext_postings p WHERE p.idx = %s AND p.term = %s"
            + where + " OFFSET 0) p0" + "".join(joins))
    return text, [*source_params, code, tokens[0], *params, *join_params]


def _phrase_arm(code: int, i: int, tokens: list[str], scope: Scope) -> tuple[str, list[Any]]:
    """(row_id, i, freq, idf) for one several-token phrase; its n counts rows of the whole
    index holding it (FTS5's xQueryPhrase), not just the scope's."""
    scoped, scoped_params = _phrase_matches(code, tokens, scope)
    everywhere, everywhere_params = _phrase_matches(code, tokens, EVERYWHERE)
    idf = (f"(SELECT {_idf('hc.n')} FROM (SELECT count(DISTINCT a.row_id) AS n FROM ({everywhere}) a"
           " WHERE a.n > 0) hc CROSS JOIN st)")  # uncorrelated: an InitPlan, run once
    text = (f"SELECT m.row_id, {int(i)} AS i, sum(m.n::float8 * w.w[m.col + 1]) AS freq, {idf} AS idf"
            f" FROM ({scoped}) m CROSS JOIN w WHERE m.n > 0 GROUP BY m.row_id")
    return text, [*everywhere_params, *scoped_params]


def computed_once(ranked_rows: sql.Composable) -> sql.Composable:
    """The ranked subquery as a MATERIALIZED CTE, so that a caller joining it to its table
    computes it once whatever the planner estimates: without fresh statistics (a growing
    store before ANALYZE) PostgreSQL planned it as the inner side of a nested loop, run once
    per document."""
    return sql.SQL("WITH ranked_rows AS MATERIALIZED ({}) SELECT row_id, raw FROM ranked_rows").format(ranked_rows)


def ranked(index: str, terms: Sequence[str], weights: Sequence[float],
           personas: Sequence[str] | None, session_id: str | None) -> tuple[sql.Composable, list[Any]]:
    """A subquery of (row_id, raw) for rows in scope holding any of the terms, raw = -bm25()
    as SQLite computes it for `MATCH scoped(any_of(terms))` with these column weights (missing
    ones count 1.0, as in FTS5). personas None: any persona; a sequence: any of those."""
    code, width = _index(index)
    phrases = fts_tokens.tokens_many(list(terms)[:MAX_QUERY_TERMS])
    single = [(i, p[0]) for i, p in enumerate(phrases) if len(p) == 1]
    multi = [(i, p) for i, p in enumerate(phrases) if len(p) > 1]
    if (not single and not multi) or (personas is not None and not personas):
        return _NOTHING, []
    scope = _scope(personas, session_id)
    arms = [_single_arm(code, single, scope)] if single else []
    arms.extend(_phrase_arm(code, i, p, scope) for i, p in multi)
    padded = [float(x) for x in list(weights)[:width]] + [1.0] * max(0, width - len(weights))
    score = (f"h.idf * ((h.freq * ({K1}::float8 + 1.0::float8)) / (h.freq + {K1}::float8 * ((1.0::float8"
             f" - {B}::float8) + {B}::float8 * r.length::float8 / st.avgdl)))")
    text = ("WITH st AS (SELECT s.rows AS n, s.tokens::float8 / s.rows::float8 AS avgdl"
            " FROM fulltext_stats s WHERE s.idx = %s AND s.rows > 0), w AS (SELECT %s::float8[] AS w),"
            " h AS (" + " UNION ALL ".join(a[0] for a in arms) + ")"
            f" SELECT h.row_id, sum({score} ORDER BY h.i) AS raw FROM h CROSS JOIN st CROSS JOIN LATERAL"
            " (SELECT r.length FROM fulltext_rows r WHERE r.idx = %s AND r.row_id = h.row_id OFFSET 0) r"
            " GROUP BY h.row_id")
    params = [code, padded, *[p for a in arms for p in a[1]], code]
    # psycopg's stubs want a LiteralString; this SQL is put together from our own constants.
    return sql.SQL(text), params  # pyright: ignore[reportArgumentType]


def ranked_join(index: str, table: str, alias: str, terms: Sequence[str],
                personas: Sequence[str] | None, session_id: str | None) -> tuple[sql.Composable, list[Any]]:
    """`FROM (<ranked rows>) s JOIN <table> <alias>` for terms ORed as SQLite's any_of does
    (its first MAX_QUERY_TERMS): s.raw is SQLite's -bm25 of the row. The caller orders by
    BEST_FIRST (see best_first)."""
    rows, params = ranked(index, list(terms)[:MAX_QUERY_TERMS], (1.0,), personas, session_id)
    return sql.SQL("FROM ({ranked}) s JOIN {table} {alias} ON {alias}.id = s.row_id").format(
        ranked=best_first(rows), table=sql.Identifier(table), alias=sql.Identifier(alias)), list(params)


# The order of ranked rows: best first, ties by id (the callers' ORDER BY, with LIMIT).
BEST_FIRST = "s.raw DESC, s.row_id"


def best_first(ranked_rows: sql.Composable) -> sql.Composable:
    """The ranked rows computed once and sorted BEST_FIRST, for `(...) s JOIN table ...
    ORDER BY BEST_FIRST LIMIT n`: the join then reads the table's rows in that order and stops
    at the limit, instead of joining every ranked row and sorting after (an unscoped query
    may match most of the store to return a page)."""
    return sql.SQL("{} ORDER BY raw DESC, row_id").format(computed_once(ranked_rows))
