"""The PostgreSQL store's aggregates, one attribute each, as on the SQLite store: the SQLite
bindings (shared/store/sqlite_repos.py) where the aggregate module's SQL is portable, with
PostgreSQL versions of the methods whose SQL is not, in documents.py, work.py, atoms.py, graph.py and graph_browse.py.
"""

from __future__ import annotations

from typing import Any

from shared.store.portable.aggregates import PortableUsers
from shared.store.postgres.atoms import PostgresAtoms
from shared.store.postgres.documents import (
    PostgresConsistency,
    PostgresDocuments,
    PostgresFullText,
    PostgresNeighbours,
    vacuum_analyze,
    vacuum_deleted,
)
from shared.store.postgres.graph import PostgresGraph
from shared.store.postgres.graph_browse import PostgresGraphBrowse
from shared.store.postgres.tables import PostgresTables
from shared.store.postgres.work import PostgresMeta, PostgresRuntime, PostgresStages, PostgresUsage, PostgresVectors

__all__ = ["Aggregates", "vacuum_analyze", "vacuum_deleted"]


class Aggregates:
    """Every aggregate of a session, bound to its runner."""

    def __init__(self, run: Any):
        self.documents = PostgresDocuments(run)
        self.stages = PostgresStages(run)
        self.graph = PostgresGraph(run)
        self.graph_browse = PostgresGraphBrowse(run)
        self.atoms = PostgresAtoms(run)
        self.vectors = PostgresVectors(run)
        self.meta = PostgresMeta(run)
        self.runtime = PostgresRuntime(run)
        self.usage = PostgresUsage(run)
        self.consistency = PostgresConsistency(run)
        self.neighbours = PostgresNeighbours(run)
        self.fts = PostgresFullText(run)
        self.users = PortableUsers(run)  # portable SQL (shared/store/users.py)
        self.tables = PostgresTables(run)
