"""The front's FAISS index follows SQLite through the change sequence, with no duplicates,
and starts from a snapshot only when that snapshot fits the database."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from shared.config import StorageConfig
from shared.search import snapshot
from shared.search.vectors import VectorIndex
from shared.store import meta, vectors
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
    docs = [store.memorize(f"memory {i}", MemoryFields(session_id=f"s{i}")) for i in range(4)]
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
    # Own sessions: not each other's conversation context (a deletion would drop the next's vector).
    docs = [store.memorize(f"m{i}", MemoryFields(session_id=f"s{i}")) for i in range(2)]
    for i, doc in enumerate(docs):
        put(store, doc, unit(i))
    assert len(index.search(unit(0), 5)) == 2
    store.delete(docs[0].id)
    with store.db.write() as tx:
        assert vectors.prune_tombstones(tx, older_than=1e12) == 1
    assert [i for i, _ in index.search(unit(0), 5)] == [docs[1].id]


# Snapshots: the index a worker saved, loaded with the changes since, or refused.

def spread(i: int) -> np.ndarray:
    """A unit vector in general position (no two memories tie for a query)."""
    v = np.random.default_rng(i).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def fill(store, n: int, model="m"):
    """n memories with vectors, each in its own session (none is another's context)."""
    docs = [store.memorize(f"memory {i}", MemoryFields(session_id=f"s{i}")) for i in range(n)]
    for i, doc in enumerate(docs):
        put(store, doc, spread(i), model=model)
    return docs


def ranking(index: VectorIndex) -> list[list[tuple[int, float]]]:
    return [[(i, round(s, 5)) for i, s in index.search(spread(100 + q), 10)] for q in range(DIM)]


def started(store, caplog, model="m") -> tuple[VectorIndex, list[str]]:
    """A new index (as a starting front has) after its first sync, and what it logged."""
    caplog.clear()
    index = VectorIndex(store.db, "document", model, DIM)
    with caplog.at_level(logging.INFO, logger="aokun.vectors"):
        index.sync()
    return index, [r.getMessage() for r in caplog.records if r.name == "aokun.vectors"]


def test_a_snapshot_serves_a_start_and_changes_since_are_applied(store, caplog):
    docs = fill(store, 6)
    assert "written: 6 vectors" in VectorIndex(store.db, "document", "m", DIM).save_snapshot()
    index, lines = started(store, caplog)
    assert "loaded snapshot" in lines[0] and "applied 0 changes since: 6 vectors" in lines[0]
    store.delete(docs[0].id)
    put(store, docs[1], spread(50))  # replaced
    put(store, store.memorize("new", MemoryFields()), spread(51))  # added
    fresh, lines = started(store, caplog)
    assert "applied 3 changes since: 6 vectors" in lines[0]
    os.remove(fresh.snapshot_path)
    rebuilt, lines = started(store, caplog)
    assert "not used (no snapshot yet)" in lines[0]
    assert ranking(fresh) == ranking(rebuilt) == ranking(index)  # the old one followed SQLite
    assert docs[0].id not in {i for hits in ranking(fresh) for i, _ in hits}


def test_a_worker_rewrites_a_snapshot_only_when_it_lags_enough(store):
    docs = fill(store, 4)
    index = VectorIndex(store.db, "document", "m", DIM)
    assert "written" in index.save_snapshot(0.25)
    assert "serves (0 changes behind, 4 vectors)" in index.save_snapshot(0.25)
    put(store, docs[0], spread(50))
    assert "serves (1 changes behind" in index.save_snapshot(0.25)
    put(store, docs[1], spread(51))
    assert "written: 4 vectors" in index.save_snapshot(0.25)


@pytest.mark.parametrize("case", ["other store", "other model", "newer", "pruned", "damaged", "not one"])
def test_an_unusable_snapshot_is_refused_with_its_reason(store, tmp_path, caplog, case):
    docs = fill(store, 3)
    VectorIndex(store.db, "document", "m", DIM).save_snapshot()
    path = snapshot.path_for(store.db.path.parent, "document")
    seq, model = snapshot.read_header(path).seq, "m"
    if case == "other store":
        other = open_database(StorageConfig(data_dir=tmp_path / "other"))
        other_store = memory_service(other)
        fill(other_store, 3)
        VectorIndex(other, "document", "m", DIM).save_snapshot()
        other.close()
        os.replace(snapshot.path_for(tmp_path / "other", "document"), path)
        reason = "made from another database"
    elif case == "other model":
        put(store, docs[0], spread(9), model="m2")
        model, reason = "m2", "made for another vector space (document, m, 8 dims)"
    elif case == "newer":
        with store.db.write() as tx:  # as if the database went back to an older copy
            meta.put(tx, meta.VECTOR_SEQ, 1)
        reason = f"newer than the database: it covers vector change {seq}, the database is at 1"
    elif case == "pruned":
        store.delete(docs[0].id)
        with store.db.write() as tx:
            vectors.prune_tombstones(tx, older_than=1e12)
        reason = f"too old: it covers vector change {seq}, and the deletions up to {seq + 1} were pruned since"
    elif case == "damaged":
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 3] ^= 1
        path.write_bytes(bytes(raw))
        reason = "damaged: checksum mismatch"
    else:
        path.write_bytes(b"{}")
        reason = "damaged: not a snapshot file"
    index, lines = started(store, caplog, model)
    assert len(lines) == 1 and f"not used ({reason}" in lines[0], lines
    assert "building the index from SQLite" in lines[0]
    assert caplog.records[-1].levelno == logging.WARNING
    assert len(index) == vectors.space_count(store.db.connection(), "document", model, DIM)


def test_a_snapshot_is_replaced_whole(store):
    fill(store, 3)
    index = VectorIndex(store.db, "document", "m", DIM)
    index.save_snapshot()
    path = index.snapshot_path
    leftover = path.with_name(f"{path.name}.tmp-999999999")  # a writer killed mid-write
    leftover.write_bytes(b"partial")
    put(store, store.memorize("another", MemoryFields()), spread(4))
    assert "written: 4 vectors" in index.save_snapshot()
    assert not leftover.exists()
    assert sorted(p.name for p in path.parent.glob("vectors-*")) == [
        "vectors-document.snapshot", "vectors-snapshot.lock"]
