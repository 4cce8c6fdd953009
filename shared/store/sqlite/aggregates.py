"""The SQLite aggregates: the portable ones (shared/store/portable/aggregates.py) with the
methods whose SQL is SQLite's own (FTS5, json_each, the catalogue), bound the same way, and
the copy's table access (tables.py reads SQLite's catalogue and FTS5 tables).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from shared.store.model.atoms import AtomOwner, AtomRow
from shared.store.model.documents import Document, DocumentFilter, MemoryFields
from shared.store.model.graph import MemoryGraph
from shared.store.model.record import Record
from shared.store.portable import consistency as shared_consistency
from shared.store.portable import meta
from shared.store.portable import tables as shared_tables
from shared.store.portable.aggregates import (
    Aggregate,
    PortableAtoms,
    PortableDocuments,
    PortableGraph,
    PortableGraphBrowse,
    PortableNeighbours,
    PortableStages,
    PortableVectors,
)
from shared.store.portable.bookkeeping import PortableMeta
from shared.store.sqlite import (
    atoms,
    consistency,
    documents,
    fts,
    graph,
    graph_browse,
    neighbours,
    stages,
    tables,
    vectors,
)

if TYPE_CHECKING:
    import numpy as np

_replace_graph = graph.replace_for_memory  # its argument `graph` hides the module below


class SqliteDocuments(PortableDocuments):
    def insert(self, text: str, tokens: str, fields: MemoryFields, now: float, context: str = "") -> int:
        return self._run.write(documents.insert, text, tokens, fields, now, context)

    def update(self, memory_id: int, text: str, tokens: str, fields: MemoryFields, now: float,
               context: str = "") -> None:
        return self._run.write(documents.update, memory_id, text, tokens, fields, now, context)

    def delete(self, memory_id: int) -> dict[str, int]:
        return self._run.write(documents.delete, memory_id)

    def add_fts_row(self, memory_id: int, tokens: str, context: str, fields: MemoryFields) -> None:
        return self._run.write(documents.add_fts_row, memory_id, tokens, context, fields)

    def set_context(self, memory_id: int, context: str) -> None:
        return self._run.write(documents.set_context, memory_id, context)

    def get_many(self, ids: Sequence[int]) -> dict[int, Document]:
        return self._run.read(documents.get_many, ids)

    def has_fts_row(self, memory_id: int) -> bool:
        return self._run.read(documents.has_fts_row, memory_id)

    def missing_fts(self) -> list[int]:
        return self._run.read(documents.missing_fts)

    def bm25(self, terms: Sequence[str], scope: DocumentFilter, limit: int,
             context_weight: float = 1.0) -> list[tuple[int, float]]:
        return self._run.read(documents.bm25, terms, scope, limit, context_weight)

    def terms_of(self, ids: Sequence[int]) -> dict[int, list[str]]:
        return self._run.read(documents.terms_of, ids)

    def filter_ids(self, ids: Sequence[int], scope: DocumentFilter) -> set[int]:
        return self._run.read(documents.filter_ids, ids, scope)


class SqliteStages(PortableStages):
    def done_among(self, memory_ids: Sequence[int], stage: str) -> set[int]:
        return self._run.read(stages.done_among, memory_ids, stage)


class SqliteGraph(PortableGraph):
    def replace_for_memory(self, memory_id: int, persona_id: str | None, graph: MemoryGraph,
                           content_hash: str, now: float) -> list[int]:
        return self._run.write(_replace_graph, memory_id, persona_id, graph, content_hash, now)

    def delete_for_memory(self, memory_id: int) -> dict[str, int]:
        return self._run.write(graph.delete_for_memory, memory_id)

    def entries_of_atoms(self, atom_ids: Sequence[int]) -> list[int]:
        return self._run.read(graph.entries_of_atoms, atom_ids)

    def delete_entries(self, entry_ids: Sequence[int]) -> dict[str, int]:
        return self._run.write(graph.delete_entries, entry_ids)

    def search_entries(self, terms: Sequence[str], persona_id: str | None, limit: int) -> list[Record]:
        return self._run.rows(graph.search_entries, terms, persona_id, limit)

    def nodes_named(self, canonicals: Sequence[str], persona_id: str | None, limit: int) -> list[int]:
        return self._run.read(graph.nodes_named, canonicals, persona_id, limit)

    def entity_nodes_named(self, canonicals: Sequence[str], persona_id: str | None) -> dict[str, list[int]]:
        return self._run.read(graph.entity_nodes_named, canonicals, persona_id)

    def neighbours(self, node_ids: Sequence[int], limit: int) -> list[int]:
        return self._run.read(graph.neighbours, node_ids, limit)

    def related(self, node_ids: Sequence[int], forward: Sequence[str], backward: Sequence[str],
                limit: int) -> list[tuple[int, float]]:
        return self._run.read(graph.related, node_ids, forward, backward, limit)

    def memories_of_nodes(self, node_ids: Sequence[int], limit: int) -> list[tuple[int, int, float]]:
        return self._run.read(graph.memories_of_nodes, node_ids, limit)

    def node_memory_counts(self, node_ids: Sequence[int], cap: int) -> dict[int, int]:
        return self._run.read(graph.node_memory_counts, node_ids, cap)

    def entry_nodes(self, entry_ids: Sequence[int]) -> list[int]:
        return self._run.read(graph.entry_nodes, entry_ids)

    def entry_ids_of_memories(self, memory_ids: Sequence[int]) -> list[int]:
        return self._run.read(graph.entry_ids_of_memories, memory_ids)

    def memory_confidence(self, memory_ids: Sequence[int]) -> dict[int, float]:
        return self._run.read(graph.memory_confidence, memory_ids)

    def memories_with_output(self, memory_ids: Sequence[int]) -> set[int]:
        return self._run.read(graph.memories_with_output, memory_ids)

    def table_counts(self) -> dict[str, int]:
        return self._run.read(graph.table_counts)


class SqliteGraphBrowse(PortableGraphBrowse):
    def persona_node_counts(self, persona_id: str) -> dict[str, int]:
        return self._run.read(graph_browse.persona_node_counts, persona_id)

    def edges_among(self, node_ids: Sequence[int]) -> list[Record]:
        return self._run.rows(graph_browse.edges_among, node_ids)

    def node_links(self, node_id: int, limit: int) -> list[Record]:
        return self._run.rows(graph_browse.node_links, node_id, limit)


class SqliteAtoms(PortableAtoms):
    def insert(self, owner: AtomOwner, row: AtomRow, now: float, state: str = "active",
               superseded_by: int | None = None, needs_repair: bool = False) -> int:
        return self._run.write(atoms.insert, owner, row, now, state, superseded_by, needs_repair)

    def forget(self, expired_before: float, now: float) -> list[int]:
        return self._run.write(atoms.forget, expired_before, now)

    def delete_for_memory(self, memory_id: int) -> dict[str, int]:
        return self._run.write(atoms.delete_for_memory, memory_id)

    def similar_active(self, terms: Sequence[str], persona_id: str | None, other_than_memory: int,
                       limit: int = 20) -> list[Record]:
        return self._run.rows(atoms.similar_active, terms, persona_id, other_than_memory, limit)

    def search(self, terms: Sequence[str], persona_id: str | None, session_id: str | None,
               types: Sequence[str] | None, limit: int) -> list[Record]:
        return self._run.rows(atoms.search, terms, persona_id, session_id, types, limit)

    def still_valid_of_types(self, types: Sequence[str], persona_id: str | None, session_id: str | None,
                             now: float, limit: int, exclude: Sequence[int] = ()) -> list[Record]:
        return self._run.rows(atoms.still_valid_of_types, types, persona_id, session_id, now, limit, exclude)

    def validity_rows(self, memory_ids: Sequence[int]) -> list[Record]:
        return self._run.rows(atoms.validity_rows, memory_ids)

    def plans_due_between(self, start: float | None, end: float | None, persona_id: str | None,
                          session_id: str | None, limit: int) -> list[Record]:
        return self._run.rows(atoms.plans_due_between, start, end, persona_id, session_id, limit)

    def supersede_chain(self, atom_id: int, persona_id: str | None, max_steps: int = 20) -> list[Record]:
        return self._run.rows(atoms.supersede_chain, atom_id, persona_id, max_steps)


class SqliteVectors(PortableVectors):
    def changes_since(self, kind: str, after_seq: int) -> int:
        return self._run.read(vectors.changes_since, kind, after_seq)

    def owners_changed_since(self, kind: str, after_seq: int) -> list[int]:
        return self._run.read(vectors.owners_changed_since, kind, after_seq)

    def iter_changes(self, kind: str, model: str, dim: int, after_seq: int,
                     batch: int = 5000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self._run.iterate(vectors.iter_changes, kind, model, dim, after_seq, batch)

    def iter_space(self, kind: str, model: str, dim: int,
                   batch: int = 5000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self._run.iterate(vectors.iter_space, kind, model, dim, batch)

    def owners_with_vectors(self, kind: str, model: str, owner_ids: Sequence[int]) -> set[int]:
        return self._run.read(vectors.owners_with_vectors, kind, model, owner_ids)


class SqliteMeta(PortableMeta):
    def ensure_store_id(self) -> int:
        return self._run.write(meta.ensure_store_id)


class SqliteConsistency(Aggregate):
    def missing_outputs(self, model: str) -> dict[str, list[int]]:
        return self._run.read(consistency.missing_outputs, model)

    def redo_missing(self, missing: dict[str, list[int]], now: float) -> int:
        return self._run.write(shared_consistency.redo_missing, missing, now)

    def table_counts(self) -> dict[str, int]:
        return self._run.whole(consistency.all_table_counts)


class SqliteNeighbours(PortableNeighbours):
    def texts_of(self, ids: Sequence[int]) -> dict[int, list[str]]:
        return self._run.read(neighbours.texts_of, ids)


class SqliteFullText(Aggregate):
    def scrub_terms(self, tables: Iterable[str]) -> None:
        return self._run.write(fts.scrub_terms, list(tables))

    def scrubs_in_place(self) -> bool:
        return self._run.read(fts.scrubs_in_place)


class SqliteTables(Aggregate):
    def names(self) -> list[str]:
        return self._run.read(tables.names)

    def count(self, table: str) -> int:
        return self._run.read(shared_tables.count, table)

    def page(self, table: str, after: Sequence[Any] | None, limit: int) -> list[Record]:
        return self._run.rows(shared_tables.page, table, after, limit)

    def put(self, table: str, rows: Sequence[Record]) -> int:
        return self._run.write(tables.put, table, rows)

    def clear_replaced(self) -> int:
        return self._run.write(tables.clear_replaced)

    def fulltext_page(self, index: str, after: int | None,
                      limit: int) -> tuple[list[tuple[int, tuple[str, ...]]], int | None]:
        return self._run.read(tables.fulltext_page, index, after, limit)

    def fulltext_put(self, index: str, rows: Sequence[tuple[int, Sequence[str]]]) -> int:
        return self._run.write(tables.fulltext_put, index, rows)

    def fulltext_count(self, index: str) -> int:
        return self._run.read(tables.fulltext_count, index)

    def finish(self) -> None:
        return self._run.write(tables.finish)
