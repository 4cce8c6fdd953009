"""The PostgreSQL store's aggregates, one attribute each, as on the SQLite store: the
portable aggregates (shared/store/portable/aggregates.py) subclassed with PostgreSQL versions
of the methods whose SQL is each engine's own (documents.py, work.py, atoms.py, graph.py,
graph_browse.py, tables.py).
"""

from __future__ import annotations

from typing import Any

from shared.store.interface import (
    Atoms,
    Consistency,
    Documents,
    FullText,
    Graph,
    GraphBrowse,
    Meta,
    Neighbours,
    Runtime,
    Stages,
    Tables,
    Usage,
    Users,
    Vectors,
)
from shared.store.portable.bookkeeping import PortableRuntime, PortableUsage, PortableUsers
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
from shared.store.postgres.work import PostgresMeta, PostgresStages, PostgresVectors

__all__ = ["Aggregates", "vacuum_analyze", "vacuum_deleted"]


class Aggregates:
    """Every aggregate of a session, bound to its runner; each attribute is typed with the
    Protocol it implements (shared/store/interface.py), so pyright checks the implementation."""

    def __init__(self, run: Any):
        self.documents: Documents = PostgresDocuments(run)
        self.stages: Stages = PostgresStages(run)
        self.graph: Graph = PostgresGraph(run)
        self.graph_browse: GraphBrowse = PostgresGraphBrowse(run)
        self.atoms: Atoms = PostgresAtoms(run)
        self.vectors: Vectors = PostgresVectors(run)
        self.meta: Meta = PostgresMeta(run)
        self.runtime: Runtime = PortableRuntime(run)
        self.usage: Usage = PortableUsage(run)
        self.consistency: Consistency = PostgresConsistency(run)
        self.neighbours: Neighbours = PostgresNeighbours(run)
        self.fts: FullText = PostgresFullText(run)
        self.users: Users = PortableUsers(run)
        self.tables: Tables = PostgresTables(run)
