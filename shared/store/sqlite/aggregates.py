"""The SQLite aggregates behind the store interface: one explicit line per method, handing the
aggregate module's function (which holds the SQL) to the session's runner (runners.py),
which supplies the connection: `read` for queries, `write` for changes, `rows`/`row` for
queries whose rows go out as Records, `iterate` for generators. The signatures are the
interface's (shared/store/interface.py), so this file reads as its SQLite column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from shared.store import (
    atoms,
    consistency,
    documents,
    graph,
    graph_browse,
    meta,
    neighbours,
    runtime,
    stages,
    tables,
    usage,
    users,
    vectors,
)
from shared.store.model.documents import Document, DocumentFilter, History, MemoryFields
from shared.store.model.graph import MemoryGraph
from shared.store.model.record import Record
from shared.store.model.users import UserRow
from shared.store.sqlite import fts

if TYPE_CHECKING:
    from shared.store.runners import Runner


class _Aggregate:
    def __init__(self, run: Runner):
        self._run = run


class SqliteDocuments(_Aggregate):
    def insert(self, text: str, tokens: str, fields: MemoryFields, now: float, context: str = "") -> int:
        return self._run.write(documents.insert, text, tokens, fields, now, context)

    def update(self, memory_id: int, text: str, tokens: str, fields: MemoryFields, now: float,
               context: str = "") -> None:
        return self._run.write(documents.update, memory_id, text, tokens, fields, now, context)

    def set_history(self, memory_id: int, history: History) -> None:
        return self._run.write(documents.set_history, memory_id, history)

    def set_pinned(self, memory_id: int, pinned: bool, now: float) -> None:
        return self._run.write(documents.set_pinned, memory_id, pinned, now)

    def delete(self, memory_id: int) -> dict[str, int]:
        return self._run.write(documents.delete, memory_id)

    def add_fts_row(self, memory_id: int, tokens: str, context: str, fields: MemoryFields) -> None:
        return self._run.write(documents.add_fts_row, memory_id, tokens, context, fields)

    def set_context(self, memory_id: int, context: str) -> None:
        return self._run.write(documents.set_context, memory_id, context)

    def touch(self, ids: Sequence[int], now: float) -> None:
        return self._run.write(documents.touch, ids, now)

    def set_decayed(self, rows: Sequence[tuple[float, float, int]]) -> None:
        return self._run.write(documents.set_decayed, rows)

    def archive_stale(self, created_before: float, importance_below: float) -> list[int]:
        return self._run.write(documents.archive_stale, created_before, importance_below)

    def get(self, memory_id: int) -> Document:
        return self._run.read(documents.get, memory_id)

    def get_many(self, ids: Sequence[int]) -> dict[int, Document]:
        return self._run.read(documents.get_many, ids)

    def find_by_source(self, source_hash: str) -> int | None:
        return self._run.read(documents.find_by_source, source_hash)

    def has_fts_row(self, memory_id: int) -> bool:
        return self._run.read(documents.has_fts_row, memory_id)

    def missing_fts(self) -> list[int]:
        return self._run.read(documents.missing_fts)

    def decay_inputs(self) -> list[Record]:
        return self._run.rows(documents.decay_inputs)

    def list(self, limit: int, offset: int, scope: DocumentFilter) -> tuple[list[Document], int]:
        return self._run.read(documents.list_page, limit, offset, scope)

    def list_by_state(self, scope: DocumentFilter, state: str, limit: int, offset: int,
                      count_cap: int) -> tuple[list[Document], int]:
        return self._run.read(documents.list_by_state, scope, state, limit, offset, count_cap)

    def persona_ids(self, limit: int) -> list[str]:
        return self._run.read(documents.persona_ids, limit)

    def bm25(self, terms: Sequence[str], scope: DocumentFilter, limit: int,
             context_weight: float = 1.0) -> list[tuple[int, float]]:
        return self._run.read(documents.bm25, terms, scope, limit, context_weight)

    def terms_of(self, ids: Sequence[int]) -> dict[int, list[str]]:
        return self._run.read(documents.terms_of, ids)

    def ids_in_scope(self, scope: DocumentFilter) -> list[int]:
        return self._run.read(documents.ids_in_scope, scope)

    def filter_ids(self, ids: Sequence[int], scope: DocumentFilter) -> set[int]:
        return self._run.read(documents.filter_ids, ids, scope)

    def count(self) -> int:
        return self._run.read(documents.count)

    def count_in(self, scope: DocumentFilter) -> int:
        return self._run.read(documents.count_in, scope)

    def stats(self) -> dict[str, int]:
        return self._run.read(documents.counts)


class SqliteStages(_Aggregate):
    def create_for_memory(self, memory_id: int, content_hash: str, now: float) -> None:
        return self._run.write(stages.create_for_memory, memory_id, content_hash, now)

    def reset_for_memory(self, memory_id: int, content_hash: str, now: float) -> None:
        return self._run.write(stages.reset_for_memory, memory_id, content_hash, now)

    def claim(self, key: stages.StageKey, owner: str, now: float, lease_s: float) -> bool:
        return self._run.write(stages.claim, key, owner, now, lease_s)

    def claim_more(self, stage: str, owner: str, now: float, lease_s: float,
                   limit: int) -> list[stages.StageKey]:
        return self._run.write(stages.claim_more, stage, owner, now, lease_s, limit)

    def complete(self, key: stages.StageKey, owner: str, now: float) -> bool:
        return self._run.write(stages.complete, key, owner, now)

    def fail(self, key: stages.StageKey, owner: str, error: str, now: float, max_attempts: int,
             retry_delay: Callable[[int], float]) -> float | None:
        return self._run.write(stages.fail, key, owner, error, now, max_attempts, retry_delay)

    def mark_enqueued(self, keys: Iterable[stages.StageKey], now: float | None) -> None:
        return self._run.write(stages.mark_enqueued, keys, now)

    def reclaim_abandoned(self, now: float, live_owners: Sequence[str], max_attempts: int) -> tuple[int, int]:
        return self._run.write(stages.reclaim_abandoned, now, live_owners, max_attempts)

    def ready_to_enqueue(self, now: float, include_enqueued: bool, limit: int = 10_000) -> list[stages.StageKey]:
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

    def done_among(self, memory_ids: Sequence[int], stage: str) -> set[int]:
        return self._run.read(stages.done_among, memory_ids, stage)

    def queue_figures(self, now: float) -> dict:
        return self._run.read(stages.queue_figures, now)

    def failed_stages(self, limit: int = 50) -> list[Record]:
        return self._run.rows(stages.failed_stages, limit)

    def stage_problems(self, now: float, limit: int = 50) -> list[dict]:
        return self._run.read(stages.stage_problems, now, limit)

    def retrying_stages(self, now: float, limit: int = 50) -> list[dict]:
        return self._run.read(stages.retrying_stages, now, limit)

    def of_memory(self, memory_id: int) -> list[Record]:
        return self._run.rows(stages.of_memory, memory_id)


_replace_graph = graph.replace_for_memory  # its argument `graph` hides the module below


class SqliteGraph(_Aggregate):
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

    def entries_memories(self, entry_ids: Sequence[int]) -> dict[int, tuple[int, float]]:
        return self._run.read(graph.entries_memories, entry_ids)

    def memory_confidence(self, memory_ids: Sequence[int]) -> dict[int, float]:
        return self._run.read(graph.memory_confidence, memory_ids)

    def memories_with_output(self, memory_ids: Sequence[int]) -> set[int]:
        return self._run.read(graph.memories_with_output, memory_ids)

    def table_counts(self) -> dict[str, int]:
        return self._run.read(graph.table_counts)


class SqliteGraphBrowse(_Aggregate):
    def graph_personas(self, limit: int) -> list[str]:
        return self._run.read(graph_browse.graph_personas, limit)

    def persona_node_counts(self, persona_id: str) -> dict[str, int]:
        return self._run.read(graph_browse.persona_node_counts, persona_id)

    def most_connected(self, persona_id: str, limit: int) -> list[Record]:
        return self._run.rows(graph_browse.most_connected, persona_id, limit)

    def edges_among(self, node_ids: Sequence[int]) -> list[Record]:
        return self._run.rows(graph_browse.edges_among, node_ids)

    def node_row(self, node_id: int) -> Record | None:
        return self._run.row(graph_browse.node_row, node_id)

    def node_links(self, node_id: int, limit: int) -> list[Record]:
        return self._run.rows(graph_browse.node_links, node_id, limit)

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


class SqliteAtoms(_Aggregate):
    def insert(self, owner: atoms.AtomOwner, row: atoms.AtomRow, now: float, state: str = "active",
               superseded_by: int | None = None, needs_repair: bool = False) -> int:
        return self._run.write(atoms.insert, owner, row, now, state, superseded_by, needs_repair)

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

    def forget(self, expired_before: float, now: float) -> list[int]:
        return self._run.write(atoms.forget, expired_before, now)

    def purge(self, forgotten_before: float, now: float) -> list[int]:
        return self._run.write(atoms.purge, forgotten_before, now)

    def delete_for_memory(self, memory_id: int) -> dict[str, int]:
        return self._run.write(atoms.delete_for_memory, memory_id)

    def of_memory(self, memory_id: int) -> list[Record]:
        return self._run.rows(atoms.of_memory, memory_id)

    def similar_active(self, terms: Sequence[str], persona_id: str | None, other_than_memory: int,
                       limit: int = 20) -> list[Record]:
        return self._run.rows(atoms.similar_active, terms, persona_id, other_than_memory, limit)

    def reinforced_by(self, memory_id: int) -> list[Record]:
        return self._run.rows(atoms.reinforced_by, memory_id)

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

    def counts_by_type_and_state(self) -> list[Record]:
        return self._run.rows(atoms.counts_by_type_and_state)

    def page(self, atom_type: str | None, state: str | None, persona_id: str | None, limit: int,
             offset: int) -> list[Record]:
        return self._run.rows(atoms.page, atom_type, state, persona_id, limit, offset)

    def supersede_chain(self, atom_id: int, persona_id: str | None, max_steps: int = 20) -> list[Record]:
        return self._run.rows(atoms.supersede_chain, atom_id, persona_id, max_steps)


class SqliteVectors(_Aggregate):
    def upsert(self, row: vectors.VectorRow, now: float) -> None:
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

    def changes_since(self, kind: str, after_seq: int) -> int:
        return self._run.read(vectors.changes_since, kind, after_seq)

    def owners_changed_since(self, kind: str, after_seq: int) -> list[int]:
        return self._run.read(vectors.owners_changed_since, kind, after_seq)

    def iter_changes(self, kind: str, model: str, dim: int, after_seq: int, batch: int = 5000) -> Iterator:
        return self._run.iterate(vectors.iter_changes, kind, model, dim, after_seq, batch)

    def iter_space(self, kind: str, model: str, dim: int, batch: int = 5000) -> Iterator:
        return self._run.iterate(vectors.iter_space, kind, model, dim, batch)

    def space_count(self, kind: str, model: str, dim: int) -> int:
        return self._run.read(vectors.space_count, kind, model, dim)

    def stored_dim(self, kind: str, model: str) -> int:
        return self._run.read(vectors.stored_dim, kind, model)

    def space_figures(self) -> list[Record]:
        return self._run.rows(vectors.space_figures)

    def documents_with_vector(self, model: str, dim: int) -> int:
        return self._run.read(vectors.documents_with_vector, model, dim)

    def owners_with_vectors(self, kind: str, model: str, owner_ids: Sequence[int]) -> set[int]:
        return self._run.read(vectors.owners_with_vectors, kind, model, owner_ids)

    def foreign_space_warning(self, model: str, dim: int) -> str | None:
        return self._run.read(vectors.foreign_space_warning, model, dim)


class SqliteMeta(_Aggregate):
    def get(self, key: str) -> float | None:
        return self._run.read(meta.get, key)

    def put(self, key: str, value: float) -> None:
        return self._run.write(meta.put, key, value)

    def recall_epoch(self) -> int:
        return self._run.read(meta.recall_epoch)

    def store_id(self) -> int | None:
        return self._run.read(meta.store_id)

    def ensure_store_id(self) -> int:
        return self._run.write(meta.ensure_store_id)


class SqliteRuntime(_Aggregate):
    def beat(self, worker_id: str, pid: int, hostname: str, now: float) -> None:
        return self._run.write(runtime.beat, worker_id, pid, hostname, now)

    def mark_autostarted(self, worker_id: str) -> None:
        return self._run.write(runtime.mark_autostarted, worker_id)

    def mark_stopping(self, worker_id: str) -> None:
        return self._run.write(runtime.mark_stopping, worker_id)

    def remove_worker(self, worker_id: str) -> None:
        return self._run.write(runtime.remove_worker, worker_id)

    def prune_workers(self, dead_before: float) -> int:
        return self._run.write(runtime.prune_workers, dead_before)

    def worker_rows(self) -> list[runtime.ProcessRow]:
        return self._run.read(runtime.worker_rows)

    def live_workers(self, alive_since: float) -> list[str]:
        return self._run.read(runtime.live_workers, alive_since)

    def newest_heartbeat(self) -> float | None:
        return self._run.read(runtime.newest_heartbeat)

    def last_worker_gone(self) -> float | None:
        return self._run.read(runtime.last_worker_gone)

    def front_beat(self, front_id: str, pid: int, hostname: str, transport: str, now: float,
                   endpoint: str | None = None) -> None:
        return self._run.write(runtime.front_beat, front_id, pid, hostname, transport, now, endpoint)

    def remove_front(self, front_id: str) -> None:
        return self._run.write(runtime.remove_front, front_id)

    def prune_fronts(self, dead_before: float) -> int:
        return self._run.write(runtime.prune_fronts, dead_before)

    def front_rows(self) -> list[runtime.ProcessRow]:
        return self._run.read(runtime.front_rows)

    def live_fronts(self, alive_since: float) -> list[runtime.ProcessRow]:
        return self._run.read(runtime.live_fronts, alive_since)

    def claim_periodic_run(self, name: str, interval_s: float, now: float, owner: str, pid: int,
                           hostname: str, lease_s: float) -> tuple[bool, float | None]:
        return self._run.write(runtime.claim_periodic_run, name, interval_s, now, owner, pid,
                               hostname, lease_s)

    def finish_periodic_run(self, name: str, owner: str, started: float) -> None:
        return self._run.write(runtime.finish_periodic_run, name, owner, started)

    def renew_periodic_claim(self, name: str, owner: str, lease_until: float) -> bool:
        return self._run.write(runtime.renew_periodic_claim, name, owner, lease_until)

    def release_periodic_run(self, name: str, owner: str) -> None:
        return self._run.write(runtime.release_periodic_run, name, owner)

    def periodic_claims(self) -> dict[str, str]:
        return self._run.read(runtime.periodic_claims)

    def periodic_runs(self) -> dict[str, float]:
        return self._run.read(runtime.periodic_runs)


class SqliteUsage(_Aggregate):
    def record(self, model: str, prompt_tokens: int, completion_tokens: int, failed: bool, now: float) -> None:
        return self._run.write(usage.record, model, prompt_tokens, completion_tokens, failed, now)

    def figures(self) -> dict[str, dict]:
        return self._run.read(usage.figures)


class SqliteConsistency(_Aggregate):
    def missing_outputs(self, model: str) -> dict[str, list[int]]:
        return self._run.read(consistency.missing_outputs, model)

    def redo_missing(self, missing: dict[str, list[int]], now: float) -> int:
        return self._run.write(consistency.redo_missing, missing, now)

    def table_counts(self) -> dict[str, int]:
        return self._run.whole(consistency.all_table_counts)


class SqliteNeighbours(_Aggregate):
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

    def texts_of(self, ids: Sequence[int]) -> dict[int, list[str]]:
        return self._run.read(neighbours.texts_of, ids)


class SqliteFullText(_Aggregate):
    def scrub_terms(self, tables: Iterable[str]) -> None:
        return self._run.write(fts.scrub_terms, list(tables))

    def scrubs_in_place(self) -> bool:
        return self._run.read(fts.scrubs_in_place)


class SqliteUsers(_Aggregate):
    def add(self, name: str, token_hash: str, personas: tuple[str, ...], admin: bool, now: float) -> bool:
        return self._run.write(users.add, name, token_hash, personas, admin, now)

    def revoke(self, name: str, now: float) -> bool:
        return self._run.write(users.revoke, name, now)

    def by_token_hash(self, token_hash: str) -> UserRow | None:
        return self._run.read(users.by_token_hash, token_hash)

    def holder_of(self, token_hash: str) -> UserRow | None:
        return self._run.read(users.holder_of, token_hash)

    def get(self, name: str) -> UserRow | None:
        return self._run.read(users.get, name)

    def all_users(self) -> list[UserRow]:
        return self._run.read(users.all_users)

    def any_active(self) -> bool:
        return self._run.read(users.any_active)


class SqliteTables(_Aggregate):
    def names(self) -> list[str]:
        return self._run.read(tables.names)

    def count(self, table: str) -> int:
        return self._run.read(tables.count, table)

    def page(self, table: str, after: Sequence | None, limit: int) -> list[Record]:
        return self._run.rows(tables.page, table, after, limit)

    def put(self, table: str, rows: Sequence) -> int:
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
