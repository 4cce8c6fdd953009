"""The stage journal: leases, idempotent completion, backoff, failure and reclaiming."""

from __future__ import annotations

import pytest

from shared.config import StorageConfig, TextConfig
from shared.store import runtime, stages
from shared.store.documents import DocumentStore, MemoryFields
from shared.store.schema import open_database
from shared.store.stages import StageKey
from shared.text.segment import Segmenter


@pytest.fixture
def store(tmp_path):
    db = open_database(StorageConfig(data_dir=tmp_path))
    yield DocumentStore(db, Segmenter(TextConfig()))
    db.close()


def rows(store, memory_id):
    return {r["stage"]: dict(r) for r in store.db.connection().execute(
        "SELECT * FROM memory_stages WHERE memory_id = ?", (memory_id,))}


def test_memorize_journals_three_pending_stages(store):
    doc = store.insert("hello", MemoryFields())
    got = rows(store, doc.id)
    assert sorted(got) == ["atoms", "embed", "graph"]
    assert {r["status"] for r in got.values()} == {"pending"}
    assert {r["content_hash"] for r in got.values()} == {doc.content_hash}


def test_claim_is_exclusive_and_completion_needs_the_lease(store):
    doc = store.insert("hello", MemoryFields())
    key = StageKey(doc.id, "embed", doc.content_hash)
    with store.db.write() as tx:
        assert stages.claim(tx, key, "w1", 100.0, 30)
        assert not stages.claim(tx, key, "w2", 100.0, 30)
        assert not stages.complete(tx, key, "w2", 101.0)
        assert stages.complete(tx, key, "w1", 101.0)
        assert not stages.claim(tx, key, "w2", 102.0, 30)  # done stays done
    assert rows(store, doc.id)["embed"]["attempts"] == 1


def test_edit_makes_old_jobs_harmless(store):
    doc = store.insert("I live in Beijing", MemoryFields())
    old = StageKey(doc.id, "embed", doc.content_hash)
    with store.db.write() as tx:
        assert stages.claim(tx, old, "w1", 100.0, 30)
    edited = store.update(doc.id, "I live in Shanghai", {})
    with store.db.write() as tx:
        assert not stages.complete(tx, old, "w1", 101.0)  # result for the old text is dropped
        assert not stages.claim(tx, old, "w1", 101.0, 30)
        assert stages.claim(tx, StageKey(doc.id, "embed", edited.content_hash), "w1", 101.0, 30)


def test_failures_back_off_then_fail_for_good(store):
    doc = store.insert("hello", MemoryFields())
    key = StageKey(doc.id, "embed", doc.content_hash)
    delays = []
    for attempt in range(1, 4):
        now = 1000.0 * attempt
        with store.db.write() as tx:
            assert stages.claim(tx, key, "w", now, 30)
            delays.append(stages.fail(tx, key, "w", "boom", now, 3, lambda n: 5.0 * 2 ** (n - 1)))
        if attempt < 3:
            with store.db.write() as tx:  # still backing off: not claimable yet
                assert not stages.claim(tx, key, "w", now + 1.5, 30)
    assert delays == [5.0, 10.0, None]
    row = rows(store, doc.id)["embed"]
    assert (row["status"], row["attempts"], row["last_error"]) == ("failed", 3, "boom")
    with store.db.write() as tx:
        assert stages.retry_failed(tx, 5000.0) == 1
        assert stages.claim(tx, key, "w", 5000.0, 30)


def test_reclaim_takes_back_leases_of_dead_or_expired_workers(store):
    a = store.insert("a", MemoryFields())
    b = store.insert("b", MemoryFields())
    with store.db.write() as tx:
        stages.claim(tx, StageKey(a.id, "embed", a.content_hash), "alive", 100.0, 1000)
        stages.claim(tx, StageKey(b.id, "embed", b.content_hash), "dead", 100.0, 1000)
        assert stages.reclaim_abandoned(tx, 200.0, ["alive"]) == 1
        assert stages.reclaim_abandoned(tx, 2000.0, ["alive"]) == 1  # lease ran out
    assert rows(store, a.id)["embed"]["status"] == rows(store, b.id)["embed"]["status"] == "pending"


def test_live_workers_ignore_a_killed_local_process(store):
    import os

    with store.db.write() as tx:
        runtime.beat(tx, "me", os.getpid(), __import__("socket").gethostname(), 100.0)
        runtime.beat(tx, "ghost", 2 ** 22 + 12345, __import__("socket").gethostname(), 100.0)
        runtime.beat(tx, "remote", 1, "another-host", 100.0)
    assert sorted(runtime.live_workers(store.db.connection(), 50.0)) == ["me", "remote"]
    assert runtime.live_workers(store.db.connection(), 150.0) == []


def test_periodic_claim_runs_once_per_due_time(store):
    with store.db.write() as tx:
        assert runtime.claim_periodic(tx, "job", 60, 1000.0) == (True, None)
        assert runtime.claim_periodic(tx, "job", 60, 1030.0) == (False, 1000.0)
        assert runtime.claim_periodic(tx, "job", 60, 1500.0) == (True, 1000.0)
