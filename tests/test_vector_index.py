"""The front's FAISS index follows SQLite through the change sequence, with no duplicates."""

from __future__ import annotations

import numpy as np
import pytest

from shared.config import StorageConfig
from shared.search.vectors import VectorIndex
from shared.store import vectors
from helpers import memory_service
from shared.store.documents import MemoryFields
from shared.store.schema import open_database

DIM = 8


def unit(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    return v


@pytest.fixture
def store(tmp_path):
    db = open_database(StorageConfig(data_dir=tmp_path))
    yield memory_service(db)
    db.close()


def put(store, doc, vec, model="m"):
    with store.db.write() as tx:
        vectors.upsert(tx, vectors.VectorRow("document", doc.id, doc.id, model, vec, doc.content_hash), 1.0)


def test_index_follows_adds_replacements_and_deletes(store):
    index = VectorIndex(store.db, "document", "m", DIM)
    docs = [store.memorize(f"memory {i}", MemoryFields()) for i in range(4)]
    for i, doc in enumerate(docs[:3]):
        put(store, doc, unit(i))
    put(store, docs[3], unit(0), model="other")  # another space: never mixed in
    assert [i for i, _ in index.search(unit(1), 10)][0] == docs[1].id
    assert len(index) == 3
    put(store, docs[1], unit(5))  # re-embedded: replaced, not duplicated
    assert len(index.search(unit(5), 10)) == 3 and len(index) == 3
    assert index.search(unit(5), 1)[0] == (docs[1].id, pytest.approx(1.0))
    store.delete(docs[0].id)
    assert docs[0].id not in [i for i, _ in index.search(unit(0), 10)]
    assert len(index) == 2


def test_edit_drops_the_stale_vector(store):
    index = VectorIndex(store.db, "document", "m", DIM)
    doc = store.memorize("I live in Beijing", MemoryFields())
    put(store, doc, unit(2))
    assert len(index.search(unit(2), 5)) == 1
    store.edit(doc.id, "I live in Shanghai", {})
    assert index.search(unit(2), 5) == []


def test_allowed_ids_restrict_the_search(store):
    index = VectorIndex(store.db, "document", "m", DIM)
    docs = [store.memorize(f"m{i}", MemoryFields()) for i in range(3)]
    for i, doc in enumerate(docs):
        put(store, doc, unit(i))
    assert [i for i, _ in index.search(unit(0), 5, allowed=[docs[2].id])] == [docs[2].id]
    assert index.search(unit(0), 5, allowed=[]) == []


def test_a_front_older_than_pruned_tombstones_rebuilds(store):
    index = VectorIndex(store.db, "document", "m", DIM)
    docs = [store.memorize(f"m{i}", MemoryFields()) for i in range(2)]
    for i, doc in enumerate(docs):
        put(store, doc, unit(i))
    assert len(index.search(unit(0), 5)) == 2
    store.delete(docs[0].id)
    with store.db.write() as tx:
        assert vectors.prune_tombstones(tx, older_than=1e12) == 1
    assert [i for i, _ in index.search(unit(0), 5)] == [docs[1].id]
