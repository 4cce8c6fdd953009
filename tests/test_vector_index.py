"""The front's FAISS index follows SQLite through the change sequence, with no duplicates,
and starts from a snapshot only when that snapshot fits the database."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from shared.assembly import open_services
from shared.config import AppConfig, StorageConfig
from shared.search import snapshot
from shared.search.vectors import VectorIndex
from shared.store.model import meta
from shared.store.model.documents import MemoryFields
from shared.store.model.vectors import VectorRow

DIM = 8


def unit(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    return v


def services_on(data_dir):
    """The parts a process builds on a store (no queue: the stages are left alone)."""
    return open_services(AppConfig(storage=StorageConfig(data_dir=data_dir)), queued=False)


@pytest.fixture
def service(tmp_path):
    services = services_on(tmp_path)
    yield services.memories
    services.close()


def put(service, doc, vec, model="m"):
    with service.store.write() as tx:
        tx.vectors.upsert(VectorRow("document", doc.id, doc.id, model, vec, doc.content_hash), 1.0)


def test_index_follows_adds_replacements_and_deletes(service):
    index = VectorIndex(service.store, "document", "m", DIM)
    docs = [service.memorize(f"memory {i}", MemoryFields(session_id=f"s{i}")) for i in range(4)]
    for i, doc in enumerate(docs[:3]):
        put(service, doc, unit(i))
    put(service, docs[3], unit(0), model="other")  # another space: never mixed in
    assert index.search(unit(1), 10)[0][0] == docs[1].id
    assert len(index) == 3
    put(service, docs[1], unit(5))  # re-embedded: replaced, not duplicated
    assert len(index.search(unit(5), 10)) == 3 and len(index) == 3
    assert index.search(unit(5), 1)[0] == (docs[1].id, pytest.approx(1.0))
    service.delete(docs[0].id)
    assert docs[0].id not in [i for i, _ in index.search(unit(0), 10)]
    assert len(index) == 2


def test_edit_drops_the_stale_vector(service):
    index = VectorIndex(service.store, "document", "m", DIM)
    doc = service.memorize("I live in Beijing", MemoryFields())
    put(service, doc, unit(2))
    assert len(index.search(unit(2), 5)) == 1
    service.edit(doc.id, "I live in Shanghai", {})
    assert index.search(unit(2), 5) == []


def test_allowed_ids_restrict_the_search(service):
    index = VectorIndex(service.store, "document", "m", DIM)
    docs = [service.memorize(f"m{i}", MemoryFields()) for i in range(3)]
    for i, doc in enumerate(docs):
        put(service, doc, unit(i))
    assert [i for i, _ in index.search(unit(0), 5, allowed=[docs[2].id])] == [docs[2].id]
    assert index.search(unit(0), 5, allowed=[]) == []


def test_a_front_older_than_pruned_tombstones_rebuilds(service):
    index = VectorIndex(service.store, "document", "m", DIM)
    # Own sessions: not each other's conversation context (a deletion would drop the next's vector).
    docs = [service.memorize(f"m{i}", MemoryFields(session_id=f"s{i}")) for i in range(2)]
    for i, doc in enumerate(docs):
        put(service, doc, unit(i))
    assert len(index.search(unit(0), 5)) == 2
    service.delete(docs[0].id)
    with service.store.write() as tx:
        assert tx.vectors.prune_tombstones(older_than=1e12) == 1
    assert [i for i, _ in index.search(unit(0), 5)] == [docs[1].id]


# Snapshots: the index a worker saved, loaded with the changes since, or refused.

def spread(i: int) -> np.ndarray:
    """A unit vector in general position (no two memories tie for a query)."""
    v = np.random.default_rng(i).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def fill(service, n: int, model="m"):
    """n memories with vectors, each in its own session (none is another's context)."""
    docs = [service.memorize(f"memory {i}", MemoryFields(session_id=f"s{i}")) for i in range(n)]
    for i, doc in enumerate(docs):
        put(service, doc, spread(i), model=model)
    return docs


def ranking(index: VectorIndex) -> list[list[tuple[int, float]]]:
    return [[(i, round(s, 5)) for i, s in index.search(spread(100 + q), 10)] for q in range(DIM)]


def started(service, caplog, model="m") -> tuple[VectorIndex, list[str]]:
    """A new index (as a starting front has) after its first sync, and what it logged."""
    caplog.clear()
    index = VectorIndex(service.store, "document", model, DIM)
    with caplog.at_level(logging.INFO, logger="aokun.vectors"):
        index.sync()
    return index, [r.getMessage() for r in caplog.records if r.name == "aokun.vectors"]


def test_a_snapshot_serves_a_start_and_changes_since_are_applied(service, caplog):
    docs = fill(service, 6)
    assert "written: 6 vectors" in VectorIndex(service.store, "document", "m", DIM).save_snapshot()
    index, lines = started(service, caplog)
    assert "loaded snapshot" in lines[0] and "applied 0 changes since: 6 vectors" in lines[0]
    service.delete(docs[0].id)
    put(service, docs[1], spread(50))  # replaced
    put(service, service.memorize("new", MemoryFields()), spread(51))  # added
    fresh, lines = started(service, caplog)
    assert "applied 3 changes since: 6 vectors" in lines[0]
    os.remove(fresh.snapshot_path)
    rebuilt, lines = started(service, caplog)
    assert "not used (no snapshot yet)" in lines[0]
    assert ranking(fresh) == ranking(rebuilt) == ranking(index)  # the old one followed SQLite
    assert docs[0].id not in {i for hits in ranking(fresh) for i, _ in hits}


def test_a_worker_rewrites_a_snapshot_only_when_it_lags_enough(service):
    docs = fill(service, 4)
    index = VectorIndex(service.store, "document", "m", DIM)
    assert "written" in index.save_snapshot(0.25)
    assert "serves (0 changes behind, 4 vectors)" in index.save_snapshot(0.25)
    put(service, docs[0], spread(50))
    assert "serves (1 changes behind" in index.save_snapshot(0.25)
    put(service, docs[1], spread(51))
    assert "written: 4 vectors" in index.save_snapshot(0.25)


@pytest.mark.parametrize("case", ["other store", "other model", "newer", "pruned", "damaged", "not one"])
def test_an_unusable_snapshot_is_refused_with_its_reason(service, tmp_path, caplog, case):
    docs = fill(service, 3)
    VectorIndex(service.store, "document", "m", DIM).save_snapshot()
    path = snapshot.path_for(service.store.cache_dir, "document")
    seq, model = snapshot.read_header(path).seq, "m"
    if case == "other store":
        other = services_on(tmp_path / "other")
        fill(other.memories, 3)
        VectorIndex(other.store, "document", "m", DIM).save_snapshot()
        other.close()
        os.replace(snapshot.path_for(tmp_path / "other", "document"), path)
        reason = "made from another database"
    elif case == "other model":
        put(service, docs[0], spread(9), model="m2")
        model, reason = "m2", "made for another vector space (document, m, 8 dims)"
    elif case == "newer":
        with service.store.write() as tx:  # as if the database went back to an older copy
            tx.meta.put(meta.VECTOR_SEQ, 1)
        reason = f"newer than the database: it covers vector change {seq}, the database is at 1"
    elif case == "pruned":
        service.delete(docs[0].id)
        with service.store.write() as tx:
            tx.vectors.prune_tombstones(older_than=1e12)
        reason = f"too old: it covers vector change {seq}, and the deletions up to {seq + 1} were pruned since"
    elif case == "damaged":
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 3] ^= 1
        path.write_bytes(bytes(raw))
        reason = "damaged: checksum mismatch"
    else:
        path.write_bytes(b"{}")
        reason = "damaged: not a snapshot file"
    index, lines = started(service, caplog, model)
    assert len(lines) == 1 and f"not used ({reason}" in lines[0], lines
    assert "building the index from the store" in lines[0]
    assert caplog.records[-1].levelno == logging.WARNING
    assert len(index) == service.store.vectors.space_count("document", model, DIM)


def test_a_snapshot_is_replaced_whole(service):
    fill(service, 3)
    index = VectorIndex(service.store, "document", "m", DIM)
    index.save_snapshot()
    path = index.snapshot_path
    leftover = path.with_name(f"{path.name}.tmp-999999999")  # a writer killed mid-write
    leftover.write_bytes(b"partial")
    put(service, service.memorize("another", MemoryFields()), spread(4))
    assert "written: 4 vectors" in index.save_snapshot()
    assert not leftover.exists()
    assert sorted(p.name for p in path.parent.glob("vectors-*")) == [
        "vectors-document.snapshot", "vectors-snapshot.lock"]
