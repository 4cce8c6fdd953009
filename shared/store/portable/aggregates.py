"""The aggregates both engines share: the methods whose SQL (in the aggregate modules,
shared/store/portable/<aggregate>.py, typed against portable.connection.Connection) both engines run,
one explicit line each, handing the module function to the session's runner (runners.py),
which supplies the connection: `read` for queries, `write` for changes, `rows`/`row` for
queries whose rows go out as Records, `iterate` for generators. Each engine's aggregates
(sqlite/aggregates.py, postgres/) subclass these and add the methods whose SQL is their own.
The bookkeeping aggregates (meta, processes, usage, users) are in bookkeeping.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from shared.store.model.documents import Document, DocumentFilter, History
from shared.store.model.record import Record
from shared.store.model.stages import StageKey
from shared.store.model.vectors import VectorRow
from shared.store.portable import (
    atoms,
    documents,
    graph,
    graph_browse,
    neighbours,
    stages,
    vectors,
)

if TYPE_CHECKING:
    from shared.store.runners import Runner


class Aggregate:
    def __init__(self, run: Runner):
        self._run = run


class PortableDocuments(Aggregate):
    def set_history(self, memory_id: int, history: History) -> None:
        return self._run.write(documents.set_history, memory_id, history)

    def set_pinned(self, memory_id: int, pinned: bool, now: float) -> None:
        return self._run.write(documents.set_pinned, memory_id, pinned, now)

    def touch(self, ids: Sequence[int], now: float) -> None:
        return self._run.write(documents.touch, ids, now)

    def set_decayed(self, rows: Sequence[tuple[float, float, int]]) -> None:
        return self._run.write(documents.set_decayed, rows)

    def archive_stale(self, created_before: float, importance_below: float) -> list[int]:
        return self._run.write(documents.archive_stale, created_before, importance_below)

    def get(self, memory_id: int) -> Document:
        return self._run.read(documents.get, memory_id)

    def find_by_source(self, source_hash: str) -> int | None:
        return self._run.read(documents.find_by_source, source_hash)

    def decay_inputs(self) -> list[Record]:
        return self._run.rows(documents.decay_inputs)

    def list(self, limit: int, offset: int, scope: DocumentFilter) -> tuple[list[Document], int]:
        return self._run.read(documents.list_page, limit, offset, scope)

    def list_by_state(self, scope: DocumentFilter, state: str, limit: int, offset: int,
                      count_cap: int) -> tuple[list[Document], int]:
        return self._run.read(documents.list_by_state, scope, state, limit, offset, count_cap)

    def persona_ids(self, limit: int) -> list[str]:
        return self._run.read(documents.persona_ids, limit)

    def ids_in_scope(self, scope: DocumentFilter) -> list[int]:
        return self._run.read(documents.ids_in_scope, scope)

    def count(self) -> int:
        return self._run.read(documents.count)

    def count_in(self, scope: DocumentFilter) -> int:
        return self._run.read(documents.count_in, scope)

    def stats(self) -> dict[str, int]:
        return self._run.read(documents.counts)


class PortableStages(Aggregate):
    def create_for_memory(self, memory_id: int, content_hash: str, now: float) -> None:
        return self._run.write(stages.create_for_memory, memory_id, content_hash, now)

    def reset_for_memory(self, memory_id: int, content_hash: str, now: float) -> None:
        return self._run.write(stages.reset_for_memory, memory_id, content_hash, now)

    def claim(self, key: StageKey, owner: str, now: float, lease_s: float) -> bool:
        return self._run.write(stages.claim, key, owner, now, lease_s)

    def claim_more(self, stage: str, owner: str, now: float, lease_s: float,
                   limit: int) -> list[StageKey]:
        return self._run.write(stages.claim_more, stage, owner, now, lease_s, limit)

    def complete(self, key: StageKey, owner: str, now: float) -> bool:
        return self._run.write(stages.complete, key, owner, now)

    def fail(self, key: StageKey, owner: str, error: str, now: float, max_attempts: int,
             retry_delay: Callable[[int], float]) -> float | None:
        return self._run.write(stages.fail, key, owner, error, now, max_attempts, retry_delay)

    def mark_enqueued(self, keys: Iterable[StageKey], now: float | None) -> None:
        return self._run.write(stages.mark_enqueued, keys, now)

    def reclaim_abandoned(self, now: float, live_owners: Sequence[str], max_attempts: int) -> tuple[int, int]:
        return self._run.write(stages.reclaim_abandoned, now, live_owners, max_attempts)

    def ready_to_enqueue(self, now: float, include_enqueued: bool, limit: int = 10_000) -> list[StageKey]:
        return self._run.read(stages.ready_to_enqueue, now, include_enqueued, limit)

    def restart_stage(self, stage: str, now: float) -> int:
        return self._run.write(stages.restart_stage, stage, now)

    def restart(self, memory_id: int, stage: str, content_hash: str, now: float) -> None:
        return self._run.write(stages.restart, memory_id, stage, content_hash, now)

    def retry_failed(self, now: float) -> int:
        return self._run.write(stages.retry_failed, now)

    def delete_for_memory(self, memory_id: int, now: float) -> dict[str, int]:
        return self._run.write(stages.delete_for_memory, memory_id, now)

    def is_done(self, memory_id: int, stage: str, content_hash: str) -> bool:
        return self._run.read(stages.is_done, memory_id, stage, content_hash)

    def queue_figures(self, now: float) -> dict[str, Any]:
        return self._run.read(stages.queue_figures, now)

    def waiting_by_stage(self) -> dict[str, int]:
        return self._run.read(stages.waiting_by_stage)

    def done_since(self, stage: str, since: float) -> int:
        return self._run.read(stages.done_since, stage, since)

    def failed_stages(self, limit: int = 50) -> list[Record]:
        return self._run.rows(stages.failed_stages, limit)

    def stage_problems(self, now: float, limit: int = 50) -> list[dict[str, Any]]:
        return self._run.read(stages.stage_problems, now, limit)

    def retrying_stages(self, now: float, limit: int = 50) -> list[dict[str, Any]]:
        return self._run.read(stages.retrying_stages, now, limit)

    def of_memory(self, memory_id: int) -> list[Record]:
        return self._run.rows(stages.of_memory, memory_id)


class PortableGraph(Aggregate):
    def entries_memories(self, entry_ids: Sequence[int]) -> dict[int, tuple[int, float]]:
        return self._run.read(graph.entries_memories, entry_ids)


class PortableGraphBrowse(Aggregate):
    def graph_personas(self, limit: int) -> list[str]:
        return self._run.read(graph_browse.graph_personas, limit)

    def most_connected(self, persona_id: str, limit: int) -> list[Record]:
        return self._run.rows(graph_browse.most_connected, persona_id, limit)

    def node_row(self, node_id: int) -> Record | None:
        return self._run.row(graph_browse.node_row, node_id)

    def node_relations(self, node_id: int, limit: int) -> list[Record]:
        return self._run.rows(graph_browse.node_relations, node_id, limit)

    def node_entries(self, node_id: int, limit: int) -> list[Record]:
        return self._run.rows(graph_browse.node_entries, node_id, limit)

    def node_memories(self, node_id: int, limit: int) -> tuple[list[int], int]:
        return self._run.read(graph_browse.node_memories, node_id, limit)

    def entries_of_memory(self, memory_id: int, limit: int = 200) -> list[Record]:
        return self._run.rows(graph_browse.entries_of_memory, memory_id, limit)

    def edges_of_memory(self, memory_id: int, limit: int = 200) -> list[Record]:
        return self._run.rows(graph_browse.edges_of_memory, memory_id, limit)


class PortableAtoms(Aggregate):
    def set_reinforcement(self, atom_id: int, count: int, confidence: float, ttl_days: float,
                          now: float, restart: bool) -> None:
        return self._run.write(atoms.set_reinforcement, atom_id, count, confidence, ttl_days, now, restart)

    def supersede(self, persona_id: str | None, subject: str, attribute: str, value: str,
                  new_id: int, now: float) -> int:
        return self._run.write(atoms.supersede, persona_id, subject, attribute, value, new_id, now)

    def reactivate_superseded_by(self, memory_id: int, now: float) -> int:
        return self._run.write(atoms.reactivate_superseded_by, memory_id, now)

    def expire(self, now: float) -> list[int]:
        return self._run.write(atoms.expire, now)

    def purge(self, forgotten_before: float, now: float) -> list[int]:
        return self._run.write(atoms.purge, forgotten_before, now)

    def of_memory(self, memory_id: int) -> list[Record]:
        return self._run.rows(atoms.of_memory, memory_id)

    def reinforced_by(self, memory_id: int) -> list[Record]:
        return self._run.rows(atoms.reinforced_by, memory_id)

    def counts_by_type_and_state(self) -> list[Record]:
        return self._run.rows(atoms.counts_by_type_and_state)

    def page(self, atom_type: str | None, state: str | None, persona_id: str | None, limit: int,
             offset: int) -> list[Record]:
        return self._run.rows(atoms.page, atom_type, state, persona_id, limit, offset)


class PortableVectors(Aggregate):
    def upsert(self, row: VectorRow, now: float) -> None:
        return self._run.write(vectors.upsert, row, now)

    def delete_for_memory(self, memory_id: int, now: float, kind: str | None = None) -> dict[str, int]:
        return self._run.write(vectors.delete_for_memory, memory_id, now, kind)

    def delete_owners(self, kind: str, owner_ids: Sequence[int], now: float) -> int:
        return self._run.write(vectors.delete_owners, kind, owner_ids, now)

    def delete_foreign(self, model: str, dim: int, now: float) -> int:
        return self._run.write(vectors.delete_foreign, model, dim, now)

    def prune_tombstones(self, older_than: float) -> int:
        return self._run.write(vectors.prune_tombstones, older_than)

    def current_seq(self) -> int:
        return self._run.read(vectors.current_seq)

    def tombstone_floor(self) -> int:
        return self._run.read(vectors.tombstone_floor)

    def of_memory(self, memory_id: int, model: str, content_hash: str) -> dict[int, np.ndarray]:
        return self._run.read(vectors.of_memory, memory_id, model, content_hash)

    def space_count(self, kind: str, model: str, dim: int) -> int:
        return self._run.read(vectors.space_count, kind, model, dim)

    def owners_in_scope(self, kind: str, scope: DocumentFilter) -> list[int]:
        return self._run.read(vectors.owners_in_scope, kind, scope)

    def stored_dim(self, kind: str, model: str) -> int:
        return self._run.read(vectors.stored_dim, kind, model)

    def space_figures(self) -> list[Record]:
        return self._run.rows(vectors.space_figures)

    def documents_with_vector(self, model: str, dim: int) -> int:
        return self._run.read(vectors.documents_with_vector, model, dim)

    def foreign_space_warning(self, model: str, dim: int) -> str | None:
        return self._run.read(vectors.foreign_space_warning, model, dim)


class PortableNeighbours(Aggregate):
    def before(self, persona_id: str | None, session_id: str | None, moment: float, limit: int,
               window_s: float, before_id: int | None = None, participants: Sequence[str] = (),
               text: str = "") -> list[tuple[int, str]]:
        return self._run.read(neighbours.before, persona_id, session_id, moment, limit, window_s,
                              before_id, participants, text)

    def link(self, memory_id: int, neighbour_ids: Sequence[int]) -> None:
        return self._run.write(neighbours.link, memory_id, neighbour_ids)

    def unlink(self, memory_id: int) -> list[int]:
        return self._run.write(neighbours.unlink, memory_id)

    def of(self, memory_id: int) -> list[tuple[int, str]]:
        return self._run.read(neighbours.of, memory_id)

    def dependents(self, neighbour_id: int) -> list[int]:
        return self._run.read(neighbours.dependents, neighbour_id)
