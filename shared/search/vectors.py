"""The vector channel: a FAISS index per vector space, derived from the vectors in the store.

IndexIDMap2(IndexFlatIP) with the store's row ids as FAISS ids; exact inner product over unit
vectors is cosine. The index follows the change sequence that vector writes bump: before each
search one tiny read tells whether anything changed, and only the changes are loaded. It
starts from the snapshot a worker saved (shared/search/snapshot.py) when that can serve, so a
cold start loads only the changes since, and from every vector in the store otherwise. FAISS
runs on one thread: on small machines its OpenMP threads fight the embedder for the cores.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shared import platform
from shared.search import snapshot
from shared.search.channel import DOCUMENT_ROUTE, note
from shared.search.query import Query
from shared.store.interface import Session, Store
from shared.store.model.documents import DocumentFilter
from shared.store.model.vectors import passage_of

log = logging.getLogger("aokun.vectors")

# Below this many vectors: exact float32 flat search (a few ms). From it on: flat search over
# float16 codes, still exhaustive but half the memory traffic (docs/performance.md: Recall speed).
# IVF would be faster still but needs k-means training (seconds at start) and HNSW cannot
# delete; fp16 needs neither and keeps add/remove_ids cheap.
FP16_FROM = 20_000


def cosine_to_unit(cosine: float) -> float:
    """Map cosine similarity in [-1, 1] to [0, 1]."""
    return (cosine + 1.0) / 2.0


class VectorIndex:
    """The in-memory index of one space (kind, model, dim); safe to use from many threads.
    dim 0: not known yet (taken from the first stored vector of the model).

    Its snapshot lives in the store's cache_dir: a snapshot belongs to the store (the
    incarnation of it) it was made from, whichever process (front, panel, worker) opens it."""

    def __init__(self, store: Store, kind: str, model: str, dim: int):
        self.store, self.kind, self.model, self.dim = store, kind, model, dim
        self.snapshot_path = snapshot.path_for(store.cache_dir, kind)
        self._lock = threading.RLock()
        # A faiss index, or None until the first sync. Any: faiss wraps its methods to take numpy
        # arrays, which the SWIG signatures type checkers read do not say.
        self._index: Any = None
        self.kind_of_index = ""
        self._seq = -1

    def __len__(self) -> int:
        return 0 if self._index is None else self._index.ntotal

    def sync(self) -> None:
        """Bring the index up to date with the store (cheap when nothing changed)."""
        if self.store.vectors.current_seq() == self._seq:
            return
        with self._lock, self.store.read() as s:
            seq = s.vectors.current_seq()
            if seq == self._seq:
                return
            if not self.dim:
                # An API model of unstated dimension: learn it from its first stored vector.
                self.dim = s.vectors.stored_dim(self.kind, self.model)
                if not self.dim:
                    return
            if self._index is None:
                self._start(s, seq)
            elif self._seq < s.vectors.tombstone_floor() or self._outgrown():
                self._rebuild(s)
            else:
                self._apply_changes(s)
            self._seq = seq

    def _start(self, s: Session, seq: int) -> None:
        """The first sync: from the snapshot and the changes since, else from every vector."""
        import faiss  # loaded before the clock starts: the log times the index

        faiss.omp_set_num_threads(1)  # a snapshot's index searches on one thread too

        started = time.perf_counter()
        loaded = snapshot.load(self.snapshot_path, self.kind, self.model, self.dim,
                               self._store_state(s, seq))
        if loaded.index is None or loaded.header is None:  # a loaded index comes with its header
            log.log(logging.INFO if loaded.missing else logging.WARNING,
                    "%s vectors: snapshot %s not used (%s); building the index from the store",
                    self.kind, self.snapshot_path, loaded.refused)
            self._rebuild(s)
            return
        self._index, self.kind_of_index = loaded.index, snapshot.base_type(loaded.index)
        self._seq = since = loaded.header.seq
        changes = s.vectors.changes_since(self.kind, since)
        if self._outgrown():
            self._rebuild(s)
        elif changes:
            self._apply_changes(s)
        log.info("%s vectors: loaded snapshot %s (%d vectors at change %d), applied %d changes "
                 "since: %d vectors, in %.0f ms", self.kind, self.snapshot_path, loaded.header.count,
                 since, changes, len(self), 1000 * (time.perf_counter() - started))

    def _store_state(self, s: Session, seq: int) -> snapshot.StoreState:
        return snapshot.StoreState(store_id=s.meta.store_id(), db_file=self.store.incarnation(),
                                   seq=seq, tombstone_floor=s.vectors.tombstone_floor())

    def _rebuild(self, s: Session) -> None:
        import faiss

        count = s.vectors.space_count(self.kind, self.model, self.dim)
        if count >= FP16_FROM:
            base = faiss.IndexScalarQuantizer(self.dim, faiss.ScalarQuantizer.QT_fp16,
                                              faiss.METRIC_INNER_PRODUCT)
        else:
            base = faiss.IndexFlatIP(self.dim)
        index: Any = faiss.IndexIDMap2(base)  # as self._index
        for ids, matrix in s.vectors.iter_space(self.kind, self.model, self.dim):
            index.add_with_ids(matrix, ids)
        self._index, self.kind_of_index = index, type(base).__name__

    def _outgrown(self) -> bool:
        """A float32 index that has grown well past the fp16 threshold is rebuilt once."""
        return self.kind_of_index == "IndexFlatIP" and len(self) >= 2 * FP16_FROM

    def _apply_changes(self, s: Session) -> None:
        changed = s.vectors.owners_changed_since(self.kind, self._seq)
        if changed:
            # remove_ids rewrites the whole flat index: one call per sync, never per id.
            self._index.remove_ids(np.asarray(changed, dtype=np.int64))
        for ids, matrix in s.vectors.iter_changes(self.kind, self.model, self.dim, self._seq):
            self._index.add_with_ids(matrix, ids)

    def save_snapshot(self, min_changes_fraction: float = 0.0) -> str:
        """Bring this space's snapshot up to date with the store unless it serves already with
        at most `min_changes_fraction` of its vectors' worth of changes to apply; say what was
        done. Workers call this; a file lock keeps two from writing it at once."""
        with platform.exclusive_file_lock(snapshot.lock_path(self.snapshot_path.parent)):
            store_id = self.store.meta.store_id()
            if store_id is None:
                with self.store.write() as tx:
                    store_id = tx.meta.ensure_store_id()
            lag = self._snapshot_lag()
            if lag is not None and lag[0] <= min_changes_fraction * lag[1]:
                return f"{self.kind} snapshot serves ({lag[0]} changes behind, {lag[1]} vectors)"
            self.sync()
            with self._lock:
                if not len(self):
                    return f"no {self.kind} vectors to snapshot"
                header = snapshot.write(self.snapshot_path, self._index, snapshot.Header(
                    kind=self.kind, model=self.model, dim=self.dim, seq=self._seq, store_id=store_id,
                    db_file=self.store.incarnation(), count=len(self)))
            return f"{self.kind} snapshot written: {header.count} vectors at change {header.seq}"

    def _snapshot_lag(self) -> tuple[int, int] | None:
        """(changes since the snapshot, its vectors) if it can serve this space, else None."""
        try:
            header = snapshot.read_header(self.snapshot_path)
        except (OSError, ValueError):
            return None
        with self.store.read() as s:
            if not self.dim:
                self.dim = s.vectors.stored_dim(self.kind, self.model)
            state = self._store_state(s, s.vectors.current_seq())
            if snapshot.unusable(header, self.kind, self.model, self.dim, state):
                return None
            return s.vectors.changes_since(self.kind, header.seq), header.count

    def search(self, query: NDArray[Any], limit: int, allowed: Sequence[int] | NDArray[Any] | None = None
               ) -> list[tuple[int, float]]:
        """(id, cosine) best first; `allowed` restricts the search to those ids."""
        import faiss

        self.sync()
        with self._lock:
            if not len(self) or limit <= 0:
                return []
            params = None
            if allowed is not None:
                if not len(allowed):
                    return []
                selector = faiss.IDSelectorBatch(np.asarray(allowed, dtype=np.int64))
                # faiss's Python wrapper takes the fields as keywords; its SWIG signature does not say so.
                params = faiss.SearchParameters(sel=selector)  # pyright: ignore[reportCallIssue]
            # numpy's stubs leave part of reshape's overloads untyped.
            row = query.reshape(1, -1)  # pyright: ignore[reportUnknownMemberType]
            scores, ids = self._index.search(row.astype(np.float32),
                                             min(limit, len(self)), params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]


class ScopeIds:
    """The ids a filter admits, cached until anything is written (the recall epoch):
    fetching a persona's ids on every recall costs more than the vector search itself."""

    def __init__(self, store: Store, fetch: Callable[[DocumentFilter], Sequence[int]],
                 size: int = 64):
        self.store = store
        self.fetch = fetch
        self.size = size
        self._cached: dict[DocumentFilter, tuple[int, np.ndarray]] = {}
        self._lock = threading.Lock()

    def get(self, scope: DocumentFilter) -> np.ndarray:
        epoch = self.store.meta.recall_epoch()
        with self._lock:
            hit = self._cached.get(scope)
        if hit is not None and hit[0] == epoch:
            return hit[1]
        ids = np.asarray(self.fetch(scope), dtype=np.int64)
        with self._lock:
            if len(self._cached) >= self.size:
                self._cached.clear()
            self._cached[scope] = (epoch, ids)
        return ids


def is_scoped(scope: DocumentFilter) -> bool:
    """Whether a filter narrows to few enough documents to search only their vectors."""
    return scope.persona_id is not None or scope.session_id is not None


@dataclass(frozen=True)
class VectorIndexes:
    """The indexes of one embedder's space: memories, long memories' further passages, graph
    entries."""

    document: VectorIndex
    passage: VectorIndex
    graph_entry: VectorIndex

    def __iter__(self) -> Iterator[VectorIndex]:
        return iter((self.document, self.passage, self.graph_entry))


class VectorChannel:
    """The document space's nearest neighbours of the query, within the recall's scope. A long
    memory scores by its best passage: its own vector (its first passage) or a further one."""

    name, route, needs_vector = "vector", DOCUMENT_ROUTE, True

    def __init__(self, store: Store, index: VectorIndex, passages: VectorIndex, weight: float):
        self.store = store
        self.index = index
        self.passages = passages
        self.weight = weight
        self.scope_ids = ScopeIds(store, store.documents.ids_in_scope)
        self.passage_scope_ids = ScopeIds(store, lambda scope: store.vectors.owners_in_scope("passage", scope))

    def search(self, query: Query, scope: DocumentFilter, depth: int) -> list[tuple[int, float]]:
        """(id, cosine mapped to [0, 1]) best first; nothing (and no embedding) while the
        space is empty."""
        self.index.sync()
        if not len(self.index):
            return []
        vector = query.vector()
        best = dict(_nearest(self.index, self.scope_ids, vector, scope, depth))
        self.passages.sync()
        if len(self.passages):
            for owner, cosine in _nearest(self.passages, self.passage_scope_ids, vector, scope, depth):
                memory_id, number = passage_of(owner)
                if cosine > best.get(memory_id, -2.0):
                    best[memory_id] = cosine
                    note(query, self.name, memory_id, passage=number)
        ranked = sorted(best.items(), key=lambda hit: -hit[1])
        admitted = self.store.documents.filter_ids([i for i, _ in ranked], scope)
        return [(i, cosine_to_unit(c)) for i, c in ranked if i in admitted][:depth]

    def strength(self, query: Query, ranking: Sequence[tuple[int, float]]) -> float | None:
        """The best cosine (the embedder's own scale; the calibration knows its range). None
        when nothing in scope has a vector yet: every vector has a nearest neighbour, so an
        empty ranking means the worker has not embedded this scope, not that nothing is near."""
        return max((2.0 * s - 1.0 for _, s in ranking), default=None)

    def indexed(self, ids: Sequence[int]) -> set[int]:
        """Memories with a vector in this space (the others wait for a worker)."""
        return self.store.vectors.owners_with_vectors("document", self.index.model, ids)


def _nearest(index: VectorIndex, scope_ids: ScopeIds, vector: NDArray[Any], scope: DocumentFilter,
             depth: int) -> list[tuple[int, float]]:
    """(owner id, cosine) best first: within the scope's owners when it narrows to few,
    else a margin more than `depth` (archived or out-of-range hits are dropped afterwards)."""
    if is_scoped(scope):
        return index.search(vector, depth, allowed=scope_ids.get(scope))
    return index.search(vector, depth * 3 + 20)
