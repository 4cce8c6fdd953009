"""The store's one interface: what every layer above the store may call, whatever the engine.

A `Store` is opened with `shared.store.schema.open_store(storage)`. Work happens in sessions:

    with store.write() as tx:          # one write transaction: commits on success,
        memory_id = tx.documents.insert(text, tokens, fields, now)   # rolls back on error
        tx.stages.create_for_memory(memory_id, content_hash, now)
    with store.read() as s:            # one consistent snapshot for several reads
        doc, rows = s.documents.get(memory_id), s.stages.of_memory(memory_id)
    store.documents.get(memory_id)     # the store is a session too: each call is one
                                       # transaction of its own (or joins the thread's open one)

A session has one attribute per aggregate (documents, stages, graph, ...), each a Protocol
below; a method is named and takes its arguments as the SQLite module function of the same
name (shared/store/<aggregate>.py, whose docstrings say the rest), minus the connection. No
engine type crosses this line: rows come back as `Record`s, failures as StorageError (also
inside a session, so a caller can catch one and go on, e.g. after a failed savepoint), and
no caller sees SQL or a connection. A second engine is a second implementation of these
Protocols (the SQLite one is shared/store/sqlite_store.py), held to the same behaviour by
tests/test_store_conformance.py.

Value types stay where they are: Document, MemoryFields, History, DocumentFilter (documents),
StageKey, STAGES (stages), AtomOwner, AtomRow, ATOM_TYPES, ATOM_STATES (atoms), NodeSpec,
EdgeSpec, EntrySpec, MemoryGraph, ENTITY_TYPES, NODE_TYPES (graph), VectorRow, KINDS
(vectors), the meta keys (meta), ProcessRow (runtime), UserRow (users), FTS_TABLES (fts),
TABLE_KEYS and FULLTEXT (tables); so do the pure helpers
(documents.content_hash, stored_text, unmarked, epoch; stages.dependents;
vectors.foreign_spaces_from; neighbours.dialogue_of; tables.key_of).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import numpy as np

    from shared.store.atoms import AtomOwner, AtomRow
    from shared.store.documents import Document, DocumentFilter, History, MemoryFields
    from shared.store.graph import MemoryGraph
    from shared.store.runtime import ProcessRow
    from shared.store.stages import StageKey
    from shared.store.users import UserRow
    from shared.store.vectors import VectorRow


class Record(tuple):
    """One result row, the same from every engine: a tuple (unpack it, index it, compare it
    with a tuple) whose columns are also read by name (row["text"], or row.text as a
    template does), and that dict(row) turns into {column: value}."""

    __slots__ = ()
    _index: ClassVar[dict[str, int]] = {}

    @staticmethod
    @lru_cache(maxsize=512)
    def kind(columns: tuple[str, ...]) -> type[Record]:
        """The Record class of rows with these columns (the first of a repeated name wins)."""
        index: dict[str, int] = {}
        for position, name in enumerate(columns):
            index.setdefault(name, position)
        return type("Record", (Record,), {"__slots__": (), "_index": index})

    def __getitem__(self, key):
        if isinstance(key, str):
            try:
                key = self._index[key]
            except KeyError:
                raise KeyError(f"no column {key!r} (columns: {', '.join(self._index)})") from None
        return tuple.__getitem__(self, key)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._index:
            raise AttributeError(name)
        return tuple.__getitem__(self, self._index[name])

    def keys(self) -> list[str]:
        return list(self._index)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._index else default

    def __repr__(self) -> str:
        return "Record(" + ", ".join(f"{k}={tuple.__getitem__(self, i)!r}" for k, i in self._index.items()) + ")"


class Documents(Protocol):
    """The memories and their BM25 rows (a document and its row are written together)."""

    # writes
    def insert(self, text: str, tokens: str, fields: MemoryFields, now: float, context: str = "") -> int: ...
    def update(self, memory_id: int, text: str, tokens: str, fields: MemoryFields, now: float,
               context: str = "") -> None: ...
    def set_history(self, memory_id: int, history: History) -> None: ...
    def set_pinned(self, memory_id: int, pinned: bool, now: float) -> None: ...
    def delete(self, memory_id: int) -> dict[str, int]:
        """Receipt {"documents": n, "documents_fts": n}."""
    def add_fts_row(self, memory_id: int, tokens: str, context: str, fields: MemoryFields) -> None: ...
    def set_context(self, memory_id: int, context: str) -> None: ...
    def touch(self, ids: Sequence[int], now: float) -> None: ...
    def set_decayed(self, rows: Sequence[tuple[float, float, int]]) -> None: ...
    def archive_stale(self, created_before: float, importance_below: float) -> list[int]: ...

    # reads
    def get(self, memory_id: int) -> Document:
        """Raises MemoryNotFound."""
    def get_many(self, ids: Sequence[int]) -> dict[int, Document]: ...
    def find_by_source(self, source_hash: str) -> int | None: ...
    def has_fts_row(self, memory_id: int) -> bool: ...
    def missing_fts(self) -> list[int]: ...
    def decay_inputs(self) -> list[Record]:
        """(id, importance, access_count, last_access_time) of every unpinned memory."""
    def list(self, limit: int, offset: int, scope: DocumentFilter) -> tuple[list[Document], int]:
        """A page newest first and the exact total (the list_memories tool)."""
    def list_by_state(self, scope: DocumentFilter, state: str, limit: int, offset: int,
                      count_cap: int) -> tuple[list[Document], int]:
        """A page newest first by state (documents.LIST_STATES) and a total counted up to count_cap."""
    def persona_ids(self, limit: int) -> list[str]: ...
    def bm25(self, terms: Sequence[str], scope: DocumentFilter, limit: int,
             context_weight: float = 1.0) -> list[tuple[int, float]]:
        """(id, raw score, higher is better) best first, ranked within the scope's persona/session."""
    def terms_of(self, ids: Sequence[int]) -> dict[int, list[str]]: ...
    def ids_in_scope(self, scope: DocumentFilter) -> list[int]: ...
    def filter_ids(self, ids: Sequence[int], scope: DocumentFilter) -> set[int]: ...
    def count(self) -> int: ...
    def count_in(self, scope: DocumentFilter) -> int: ...
    def stats(self) -> dict[str, int]:
        """{"total", "pinned", "archived", "active"} (DocumentStore.stats, documents.counts)."""


class Stages(Protocol):
    """The stage journal: what each memory still needs (embed, atoms, graph), with leases."""

    def create_for_memory(self, memory_id: int, content_hash: str, now: float) -> None: ...
    def reset_for_memory(self, memory_id: int, content_hash: str, now: float) -> None: ...
    def claim(self, key: StageKey, owner: str, now: float, lease_s: float) -> bool:
        """Lease one due pending stage; exactly one of two concurrent claimers gets True."""
    def claim_more(self, stage: str, owner: str, now: float, lease_s: float, limit: int) -> list[StageKey]: ...
    def complete(self, key: StageKey, owner: str, now: float) -> bool:
        """Done, if `owner` still holds the lease on this content version."""
    def fail(self, key: StageKey, owner: str, error: str, now: float, max_attempts: int,
             retry_delay: Callable[[int], float]) -> float | None:
        """Pending after a backoff (returned) or failed for good (None)."""
    def mark_enqueued(self, keys: Iterable[StageKey], now: float | None) -> None: ...
    def reclaim_abandoned(self, now: float, live_owners: Sequence[str], max_attempts: int) -> tuple[int, int]: ...
    def ready_to_enqueue(self, now: float, include_enqueued: bool, limit: int = 10_000) -> list[StageKey]: ...
    def restart_stage(self, stage: str, now: float) -> int: ...
    def restart(self, memory_id: int, stage: str, content_hash: str, now: float) -> None: ...
    def retry_failed(self, now: float) -> int: ...
    def delete_for_memory(self, memory_id: int, now: float) -> dict[str, int]: ...
    def is_done(self, memory_id: int, stage: str, content_hash: str) -> bool: ...
    def done_among(self, memory_ids: Sequence[int], stage: str) -> set[int]: ...
    def queue_figures(self, now: float) -> dict:
        """{pending, running, failed, done, oldest_pending_age_s, stuck, retrying}."""
    def failed_stages(self, limit: int = 50) -> list[Record]:
        """(memory_id, stage, attempts, last_error)."""
    def stage_problems(self, now: float, limit: int = 50) -> list[dict]: ...
    def retrying_stages(self, now: float, limit: int = 50) -> list[dict]: ...
    def of_memory(self, memory_id: int) -> list[Record]:
        """stage, status, attempts, last_error, next_attempt_time, lease_until, update_time, content_hash."""


class Graph(Protocol):
    """The knowledge graph's writes and recall's reads."""

    def replace_for_memory(self, memory_id: int, persona_id: str | None, graph: MemoryGraph,
                           content_hash: str, now: float) -> list[int]:
        """The new entry ids (the caller drops the old entries' vectors first)."""
    def delete_for_memory(self, memory_id: int) -> dict[str, int]: ...
    def entries_of_atoms(self, atom_ids: Sequence[int]) -> list[int]: ...
    def delete_entries(self, entry_ids: Sequence[int]) -> dict[str, int]: ...
    def search_entries(self, terms: Sequence[str], persona_id: str | None, limit: int) -> list[Record]:
        """(entry_id, memory_id, raw bm25 score, confidence) best first."""
    def nodes_named(self, canonicals: Sequence[str], persona_id: str | None, limit: int) -> list[int]: ...
    def entity_nodes_named(self, canonicals: Sequence[str], persona_id: str | None) -> dict[str, list[int]]: ...
    def neighbours(self, node_ids: Sequence[int], limit: int) -> list[int]: ...
    def related(self, node_ids: Sequence[int], forward: Sequence[str], backward: Sequence[str],
                limit: int) -> list[tuple[int, float]]: ...
    def memories_of_nodes(self, node_ids: Sequence[int], limit: int) -> list[tuple[int, int, float]]: ...
    def node_memory_counts(self, node_ids: Sequence[int], cap: int) -> dict[int, int]: ...
    def entry_nodes(self, entry_ids: Sequence[int]) -> list[int]: ...
    def entry_ids_of_memories(self, memory_ids: Sequence[int]) -> list[int]: ...
    def entries_memories(self, entry_ids: Sequence[int]) -> dict[int, tuple[int, float]]: ...
    def memory_confidence(self, memory_ids: Sequence[int]) -> dict[int, float]: ...
    def memories_with_output(self, memory_ids: Sequence[int]) -> set[int]: ...
    def table_counts(self) -> dict[str, int]:
        """{"graph_nodes", "graph_edges", "graph_entries", "graph_entries_fts"}."""


class GraphBrowse(Protocol):
    """The graph as people browse it (the panel)."""

    def graph_personas(self, limit: int) -> list[str]: ...
    def persona_node_counts(self, persona_id: str) -> dict[str, int]: ...
    def most_connected(self, persona_id: str, limit: int) -> list[Record]:
        """(id, type, value, canonical, degree)."""
    def edges_among(self, node_ids: Sequence[int]) -> list[Record]:
        """(src, dst, type, relation, memories)."""
    def node_row(self, node_id: int) -> Record | None:
        """id, persona_id, type, value, canonical, forms (a JSON list)."""
    def node_links(self, node_id: int, limit: int) -> list[Record]: ...
    def node_relations(self, node_id: int, limit: int) -> list[Record]: ...
    def node_entries(self, node_id: int, limit: int) -> list[Record]: ...
    def node_memories(self, node_id: int, limit: int) -> tuple[list[int], int]: ...
    def entries_of_memory(self, memory_id: int, limit: int = 200) -> list[Record]: ...
    def edges_of_memory(self, memory_id: int, limit: int = 200) -> list[Record]: ...


class Atoms(Protocol):
    """Typed facts with a shelf life (rows have the memory_atoms columns)."""

    def insert(self, owner: AtomOwner, row: AtomRow, now: float, state: str = "active",
               superseded_by: int | None = None, needs_repair: bool = False) -> int: ...
    def set_reinforcement(self, atom_id: int, count: int, confidence: float, ttl_days: float,
                          now: float, restart: bool) -> None: ...
    def supersede(self, persona_id: str | None, subject: str, attribute: str, value: str,
                  new_id: int, now: float) -> int: ...
    def reactivate_superseded_by(self, memory_id: int, now: float) -> int: ...
    def expire(self, now: float) -> list[int]: ...
    def forget(self, expired_before: float, now: float) -> list[int]: ...
    def purge(self, forgotten_before: float, now: float) -> list[int]: ...
    def delete_for_memory(self, memory_id: int) -> dict[str, int]: ...
    def of_memory(self, memory_id: int) -> list[Record]: ...
    def similar_active(self, terms: Sequence[str], persona_id: str | None, other_than_memory: int,
                       limit: int = 20) -> list[Record]: ...
    def reinforced_by(self, memory_id: int) -> list[Record]: ...
    def search(self, terms: Sequence[str], persona_id: str | None, session_id: str | None,
               types: Sequence[str] | None, limit: int) -> list[Record]:
        """Active atoms with a `raw` column (higher is better), best first."""
    def still_valid_of_types(self, types: Sequence[str], persona_id: str | None, session_id: str | None,
                             now: float, limit: int, exclude: Sequence[int] = ()) -> list[Record]: ...
    def validity_rows(self, memory_ids: Sequence[int]) -> list[Record]: ...
    def plans_due_between(self, start: float | None, end: float | None, persona_id: str | None,
                          session_id: str | None, limit: int) -> list[Record]:
        """Memories with a current plan due in [start, end) (either open): memory_id, deadline
        (its earliest there), soonest first."""
    def counts_by_type_and_state(self) -> list[Record]:
        """(type, state, count)."""
    def page(self, atom_type: str | None, state: str | None, persona_id: str | None, limit: int,
             offset: int) -> list[Record]: ...
    def supersede_chain(self, atom_id: int, persona_id: str | None, max_steps: int = 20) -> list[Record]: ...


class Vectors(Protocol):
    """Embedding vectors, the truth for every vector space, with a change sequence: every
    upsert and deletion takes the next number, so a cache that saw number N (the FAISS index)
    catches up by reading what changed after N."""

    def upsert(self, row: VectorRow, now: float) -> None: ...
    def delete_for_memory(self, memory_id: int, now: float, kind: str | None = None) -> dict[str, int]: ...
    def delete_owners(self, kind: str, owner_ids: Sequence[int], now: float) -> int: ...
    def delete_foreign(self, model: str, dim: int, now: float) -> int: ...
    def prune_tombstones(self, older_than: float) -> int: ...
    def current_seq(self) -> int: ...
    def tombstone_floor(self) -> int: ...
    def changes_since(self, kind: str, after_seq: int) -> int: ...
    def owners_changed_since(self, kind: str, after_seq: int) -> list[int]: ...
    def iter_changes(self, kind: str, model: str, dim: int, after_seq: int,
                     batch: int = 5000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, matrix) batches; consume it whole (on the store it holds one snapshot open)."""
    def iter_space(self, kind: str, model: str, dim: int,
                   batch: int = 5000) -> Iterator[tuple[np.ndarray, np.ndarray]]: ...
    def space_count(self, kind: str, model: str, dim: int) -> int: ...
    def stored_dim(self, kind: str, model: str) -> int: ...
    def space_figures(self) -> list[Record]:
        """(kind, model, dim, count) per stored space."""
    def documents_with_vector(self, model: str, dim: int) -> int: ...
    def owners_with_vectors(self, kind: str, model: str, owner_ids: Sequence[int]) -> set[int]: ...
    def foreign_space_warning(self, model: str, dim: int) -> str | None: ...


class Meta(Protocol):
    """One number per key named in shared/store/meta.py (KeyError for any other key)."""

    def get(self, key: str) -> float | None: ...
    def put(self, key: str, value: float) -> None: ...
    def recall_epoch(self) -> int:
        """Grows whenever anything recall can return changes."""
    def store_id(self) -> int | None: ...
    def ensure_store_id(self) -> int: ...


class Runtime(Protocol):
    """Heartbeats of workers and fronts, and periodic jobs' last runs."""

    def beat(self, worker_id: str, pid: int, hostname: str, now: float) -> None: ...
    def mark_autostarted(self, worker_id: str) -> None: ...
    def mark_stopping(self, worker_id: str) -> None: ...
    def remove_worker(self, worker_id: str) -> None: ...
    def prune_workers(self, dead_before: float) -> int: ...
    def worker_rows(self) -> list[ProcessRow]: ...
    def live_workers(self, alive_since: float) -> list[str]: ...
    def newest_heartbeat(self) -> float | None:
        """The newest heartbeat of any worker, those stopped since included; None: none ever ran."""
    def last_worker_gone(self) -> float | None:
        """When the last worker whose row is gone (stopped, or pruned) was last seen."""
    def front_beat(self, front_id: str, pid: int, hostname: str, transport: str, now: float,
                   endpoint: str | None = None) -> None: ...
    def remove_front(self, front_id: str) -> None: ...
    def prune_fronts(self, dead_before: float) -> int: ...
    def front_rows(self) -> list[ProcessRow]: ...
    def live_fronts(self, alive_since: float) -> list[ProcessRow]: ...
    def claim_periodic_run(self, name: str, interval_s: float, now: float, owner: str, pid: int,
                           hostname: str, lease_s: float) -> tuple[bool, float | None]:
        """(due, last finished run): claim a due run for `owner` without recording it as run;
        a claim of a dead process or past its lease is taken over; exactly one of concurrent
        claimers gets True."""
    def finish_periodic_run(self, name: str, owner: str, started: float) -> None:
        """Record the claimed run as the job's last run and let the claim go."""
    def renew_periodic_claim(self, name: str, owner: str, lease_until: float) -> bool:
        """Extend the lease of a claim `owner` still holds (False: taken over meanwhile)."""
    def release_periodic_run(self, name: str, owner: str) -> None: ...
    def periodic_claims(self) -> dict[str, str]: ...
    def periodic_runs(self) -> dict[str, float]:
        """Each job's last finished run."""


class Usage(Protocol):
    """Tokens spent on language models, per model."""

    def record(self, model: str, prompt_tokens: int, completion_tokens: int, failed: bool, now: float) -> None: ...
    def figures(self) -> dict[str, dict]: ...


class Consistency(Protocol):
    """What a memory should have and lacks, and the rows per table."""

    def missing_outputs(self, model: str) -> dict[str, list[int]]: ...
    def redo_missing(self, missing: dict[str, list[int]], now: float) -> int: ...
    def table_counts(self) -> dict[str, int]:
        """Rows per table in one consistent read (consistency.all_table_counts)."""


class Neighbours(Protocol):
    """Conversation context: the memories a memory is indexed together with."""

    def before(self, persona_id: str | None, session_id: str | None, moment: float, limit: int,
               window_s: float, before_id: int | None = None, participants: Sequence[str] = (),
               text: str = "") -> list[tuple[int, str]]: ...
    def link(self, memory_id: int, neighbour_ids: Sequence[int]) -> None: ...
    def unlink(self, memory_id: int) -> list[int]: ...
    def of(self, memory_id: int) -> list[tuple[int, str]]: ...
    def dependents(self, neighbour_id: int) -> list[int]: ...
    def texts_of(self, ids: Sequence[int]) -> dict[int, list[str]]: ...


class FullText(Protocol):
    """Delete means gone: the full-text indexes keep no word of a deleted row."""

    def scrub_terms(self, tables: Iterable[str]) -> None:
        """Inside the deleting write: the named indexes (fts.FTS_TABLES) drop deleted rows' words."""
    def scrubs_in_place(self) -> bool:
        """Whether scrub_terms is cheap here (else the worker's hourly upkeep does it)."""


class Users(Protocol):
    """Users and their tokens, kept as hashes (shared/store/users.py; the rules: shared/access.py)."""

    def add(self, name: str, token_hash: str, personas: tuple[str, ...], admin: bool, now: float) -> bool:
        """False (nothing written) when an active user has the name; a revoked one's is reused."""
    def revoke(self, name: str, now: float) -> bool:
        """False when no active user has the name."""
    def by_token_hash(self, token_hash: str) -> UserRow | None:
        """The active user whose token has this hash."""
    def holder_of(self, token_hash: str) -> UserRow | None:
        """The user whose token has this hash, revoked or not."""
    def get(self, name: str) -> UserRow | None: ...
    def all_users(self) -> list[UserRow]: ...
    def any_active(self) -> bool: ...


class Tables(Protocol):
    """Every table's rows as they are, to copy a store to another engine (aokun migrate;
    shared/store/tables.py names the tables, their keys and the full-text indexes): pages in
    primary-key order, and insert-if-absent keeping every column (ids, times), so a copy
    that was killed is finished by running it again."""

    def names(self) -> list[str]:
        """The copied tables (tables.TABLE_KEYS) this store has, in copy order."""
    def count(self, table: str) -> int: ...
    def page(self, table: str, after: Sequence[Any] | None, limit: int) -> list[Record]:
        """Up to `limit` rows, every column, with a key above `after` (tables.key_of of the
        last row seen; None: from the first), in key order."""
    def put(self, table: str, rows: Sequence[Record]) -> int:
        """Insert the rows whose key is absent, every column kept (in tables.REPLACED: the
        rows replace the target's); return how many were written."""
    def clear_replaced(self) -> int:
        """Before a copy into an empty store: drop the rows of tables.REPLACED (the store's
        own bookkeeping), so the copy leaves the source's only; how many went."""
    def fulltext_page(self, index: str, after: int | None,
                      limit: int) -> tuple[list[tuple[int, tuple[str, ...]]], int | None]:
        """((row id, column texts) of an index (tables.FULLTEXT), the row id to continue after
        or None at the end)."""
    def fulltext_put(self, index: str, rows: Sequence[tuple[int, Sequence[str]]]) -> int:
        """Index the rows the index lacks (for rows of its table that exist); return how many."""
    def fulltext_count(self, index: str) -> int: ...
    def finish(self) -> None:
        """After a copy: new rows take ids past the copied ones."""


class Session(Protocol):
    """Every aggregate, on one transaction (or, on the Store itself, one per call)."""

    documents: Documents
    stages: Stages
    graph: Graph
    graph_browse: GraphBrowse
    atoms: Atoms
    vectors: Vectors
    meta: Meta
    runtime: Runtime
    usage: Usage
    consistency: Consistency
    neighbours: Neighbours
    fts: FullText
    users: Users
    tables: Tables

    def savepoint(self, name: str) -> AbstractContextManager[None]:
        """A nested transaction inside write(): on an error only its own writes are undone
        (and the error passed on), the outer transaction goes on."""

    def transaction_alive(self) -> bool:
        """Whether the transaction can still go on: False once a failure rolled it all back
        (disk full, I/O error), when no savepoint can save the rest."""


class Store(Session, Protocol):
    """One memory store: sessions, and the store itself used as a session of one transaction
    per call (joining the calling thread's open transaction, if any)."""

    engine: str          # "sqlite"
    location: str        # for messages and doctor: the database file, or the server and database
    cache_dir: Path      # a local folder for what processes derive from this store (FAISS snapshots)

    def read(self) -> AbstractContextManager[Session]:
        """One consistent snapshot: other sessions' commits meanwhile are not seen. Writes
        in it raise StorageError."""

    def reading(self) -> AbstractContextManager[None]:
        """Calls on the store from this thread inside the block may share one read snapshot
        (a database server answers one transaction instead of one per call; SQLite's
        in-process calls need none, so there it does nothing). Inside an open transaction it
        joins it. Only reads inside: a write there fails."""

    def write(self) -> AbstractContextManager[Session]:
        """One write transaction (writers wait for each other up to the busy timeout):
        commits when the block ends, rolls back when it raises. Failures: StorageError."""

    def incarnation(self) -> int:
        """Changes when the store is replaced underneath (a restore): a cache made from an
        earlier incarnation is never used."""

    def flush_deleted(self) -> bool:
        """After a delete's commit, outside any transaction: no page from before it stays in
        the engine's files. Never raises; False when it waits for a reader (done later)."""

    def refresh_statistics(self) -> bool:
        """The query planner's statistics brought up to date with the store's growth (the
        worker's hourly housekeeping), outside any transaction. Never raises; False when it
        could not (done next time)."""

    def backup(self, directory: Path, now: float, reason: str) -> Path:
        """An online, checked copy of the store in a new file in directory."""

    def close(self) -> None:
        """Release every connection (threads using the store afterwards open new ones)."""
