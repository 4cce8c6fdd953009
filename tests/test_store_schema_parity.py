"""Both engines' migrations make the same schema: after every migration has run on each, the
tables, their columns (name, nullability, type family), primary keys and indexes (column
lists) are the same. Each engine's own full-text and bookkeeping tables are listed below by
name, as such; any other difference fails, so a migration written for one engine only (a
column added on SQLite alone) is caught here.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from servers import pg_url  # noqa: F401 (the fixture)
from shared.config import StorageConfig
from shared.store import open_store

# Tables one engine has and the other has not, each for its own full-text search.
SQLITE_ONLY = {"documents_fts", "atoms_fts", "graph_entries_fts"}  # FTS5 (their shadow tables too)
FTS5_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config")
# PostgreSQL's BM25 tables (postgres/fulltext.py), and what its caches are keyed on (SQLite's
# is the database file's inode).
POSTGRES_ONLY = {"fulltext_stats", "fulltext_rows", "fulltext_terms", "fulltext_postings", "store_incarnation"}

# The differences the two schemas are known to have, and why; any other fails the test.
KNOWN_DIFFERENCES = frozenset({
    # The meta value holds epochs (reals) and the 62-bit store id: SQLite's INTEGER affinity
    # keeps either as given, PostgreSQL needs DOUBLE PRECISION for both (postgres/work.py).
    "meta: column ('value', False, 'integer') on SQLite, not on PostgreSQL",
    "meta: column ('value', False, 'real') on PostgreSQL, not on SQLite",
})

# Declared types, by the family of values they hold (SQLite's booleans are INTEGER 0/1, and so
# are PostgreSQL's here).
FAMILIES = {
    "integer": "integer", "int": "integer", "bigint": "integer", "smallint": "integer",
    "real": "real", "double precision": "real", "numeric": "real",
    "text": "text", "character varying": "text",
    "blob": "bytes", "bytea": "bytes",
}


@dataclass(frozen=True)
class Table:
    columns: frozenset[tuple[str, bool, str]]       # (name, nullable, type family)
    primary_key: tuple[str, ...]
    indexes: frozenset[tuple[str, ...]]              # column lists ("<expression>" for one)


def family(declared: str) -> str:
    return FAMILIES.get(declared.strip().lower(), f"unknown {declared!r}")


def sqlite_schema(path: Path) -> dict[str, Table]:
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                            " AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        shadows = {f"{fts}{suffix}" for fts in SQLITE_ONLY for suffix in FTS5_SHADOWS}
        return {name: _sqlite_table(conn, name) for name in names if name not in shadows}
    finally:
        conn.close()


def _sqlite_table(conn: sqlite3.Connection, name: str) -> Table:
    info = conn.execute(f'PRAGMA table_info("{name}")').fetchall()  # cid, name, type, notnull, default, pk
    # An INTEGER PRIMARY KEY is the rowid: never NULL, whatever its declaration says.
    columns = frozenset((c[1], not (c[3] or c[5]), family(c[2])) for c in info)
    primary_key = tuple(c[1] for c in sorted((c for c in info if c[5]), key=lambda c: c[5]))
    indexes = set()
    for index in conn.execute(f'PRAGMA index_list("{name}")').fetchall():  # seq, name, unique, origin, partial
        if index[3] == "pk":
            continue
        parts = conn.execute(f'PRAGMA index_xinfo("{index[1]}")').fetchall()  # seqno, cid, name, desc, coll, key
        indexes.add(tuple(p[2] if p[1] >= 0 else "<expression>" for p in parts if p[5]))
    return Table(columns, primary_key, frozenset(indexes))


def postgres_schema(url: str) -> dict[str, Table]:
    with psycopg.connect(url) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            " AND table_type = 'BASE TABLE' ORDER BY table_name")]
        return {name: _postgres_table(conn, name) for name in names}


def _postgres_table(conn: psycopg.Connection, name: str) -> Table:
    columns = frozenset((r[0], r[1] == "YES", family(r[2])) for r in conn.execute(
        "SELECT column_name, is_nullable, data_type FROM information_schema.columns"
        " WHERE table_schema = 'public' AND table_name = %s", (name,)))
    indexes: set[tuple[str, ...]] = set()
    primary_key: tuple[str, ...] = ()
    for is_primary, keys in conn.execute(
            "SELECT i.indisprimary, ARRAY(SELECT COALESCE(a.attname, '<expression>')"
            "   FROM unnest(i.indkey[0:i.indnkeyatts - 1]) WITH ORDINALITY AS k(attnum, n)"
            "   LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
            "   ORDER BY k.n)"
            " FROM pg_index i WHERE i.indrelid = %s::regclass", (name,)):
        if is_primary:
            primary_key = tuple(keys)
        else:
            indexes.add(tuple(keys))
    return Table(columns, primary_key, frozenset(indexes))


def differences(sqlite: dict[str, Table], postgres: dict[str, Table]) -> list[str]:
    found = []
    for name in sorted(set(sqlite) - SQLITE_ONLY - set(postgres)):
        found.append(f"table {name} on SQLite only")
    for name in sorted(set(postgres) - POSTGRES_ONLY - set(sqlite)):
        found.append(f"table {name} on PostgreSQL only")
    for name in sorted(set(sqlite) & set(postgres)):
        mine, theirs = sqlite[name], postgres[name]
        for column in sorted(mine.columns - theirs.columns):
            found.append(f"{name}: column {column} on SQLite, not on PostgreSQL")
        for column in sorted(theirs.columns - mine.columns):
            found.append(f"{name}: column {column} on PostgreSQL, not on SQLite")
        if mine.primary_key != theirs.primary_key:
            found.append(f"{name}: primary key {mine.primary_key} on SQLite, {theirs.primary_key} on PostgreSQL")
        for index in sorted(mine.indexes - theirs.indexes):
            found.append(f"{name}: index on {index} on SQLite, not on PostgreSQL")
        for index in sorted(theirs.indexes - mine.indexes):
            found.append(f"{name}: index on {index} on PostgreSQL, not on SQLite")
    for name in sorted(SQLITE_ONLY - set(sqlite)) + sorted(POSTGRES_ONLY - set(postgres)):
        found.append(f"engine-specific table {name} is missing")
    return found


@pytest.fixture
def schemas(tmp_path, pg_url) -> tuple[dict[str, Table], dict[str, Table]]:
    open_store(StorageConfig(data_dir=tmp_path / "sqlite")).close()
    open_store(StorageConfig(backend="postgresql", url=pg_url, data_dir=tmp_path / "postgres")).close()
    return sqlite_schema(StorageConfig(data_dir=tmp_path / "sqlite").db_path), postgres_schema(pg_url)


def test_both_engines_migrate_to_the_same_schema(schemas):
    sqlite, postgres = schemas
    assert sorted(differences(sqlite, postgres)) == sorted(KNOWN_DIFFERENCES)


def test_a_column_on_one_engine_only_is_a_difference(schemas):
    sqlite, postgres = schemas
    documents = sqlite["documents"]
    widened = Table(documents.columns | {("mood", True, "text")}, documents.primary_key, documents.indexes)
    assert set(differences({**sqlite, "documents": widened}, postgres)) - KNOWN_DIFFERENCES == {
        "documents: column ('mood', True, 'text') on SQLite, not on PostgreSQL"}
