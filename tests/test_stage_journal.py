"""The stage journal: leases, idempotent completion, backoff, failure and reclaiming."""

from __future__ import annotations

import pytest

from shared.config import AppConfig, StorageConfig, TextConfig
from shared.live_config import LiveConfig
from shared.memories import MemoryService
from shared.store import runtime, stages
from shared.store.documents import MemoryFields
from shared.store.schema import open_database
from shared.store.stages import StageKey
from shared.text.segment import Segmenter


@pytest.fixture
def store(tmp_path):
    db = open_database(StorageConfig(data_dir=tmp_path))
    yield MemoryService(db, Segmenter(TextConfig()), None, LiveConfig(AppConfig()), ttl_for=lambda kind, importance, n: 30.0)
    db.close()


def rows(store, memory_id):
    return {r["stage"]: dict(r) for r in store.db.connection().execute(
        "SELECT * FROM memory_stages WHERE memory_id = ?", (memory_id,))}


def test_memorize_journals_three_pending_stages(store):
    doc = store.memorize("hello", MemoryFields())
    got = rows(store, doc.id)
    assert sorted(got) == ["atoms", "embed", "graph"]
    assert {r["status"] for r in got.values()} == {"pending"}
    assert {r["content_hash"] for r in got.values()} == {doc.content_hash}


def test_claim_is_exclusive_and_completion_needs_the_lease(store):
    doc = store.memorize("hello", MemoryFields())
    key = StageKey(doc.id, "embed", doc.content_hash)
    with store.db.write() as tx:
        assert stages.claim(tx, key, "w1", 100.0, 30)
        assert not stages.claim(tx, key, "w2", 100.0, 30)
        assert not stages.complete(tx, key, "w2", 101.0)
        assert stages.complete(tx, key, "w1", 101.0)
        assert not stages.claim(tx, key, "w2", 102.0, 30)  # done stays done
    assert rows(store, doc.id)["embed"]["attempts"] == 1


def test_edit_makes_old_jobs_harmless(store):
    doc = store.memorize("I live in Beijing", MemoryFields())
    old = StageKey(doc.id, "embed", doc.content_hash)
    with store.db.write() as tx:
        assert stages.claim(tx, old, "w1", 100.0, 30)
    edited = store.edit(doc.id, "I live in Shanghai", {})
    with store.db.write() as tx:
        assert not stages.complete(tx, old, "w1", 101.0)  # result for the old text is dropped
        assert not stages.claim(tx, old, "w1", 101.0, 30)
        assert stages.claim(tx, StageKey(doc.id, "embed", edited.content_hash), "w1", 101.0, 30)


def test_failures_back_off_then_fail_for_good(store):
    doc = store.memorize("hello", MemoryFields())
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
    a = store.memorize("a", MemoryFields())
    b = store.memorize("b", MemoryFields())
    with store.db.write() as tx:
        stages.claim(tx, StageKey(a.id, "embed", a.content_hash), "alive", 100.0, 1000)
        stages.claim(tx, StageKey(b.id, "embed", b.content_hash), "dead", 100.0, 1000)
        assert stages.reclaim_abandoned(tx, 200.0, ["alive"], 8) == (1, 0)
        assert stages.reclaim_abandoned(tx, 2000.0, ["alive"], 8) == (1, 0)  # lease ran out
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


def test_leases_that_keep_running_out_end_in_failed(store):
    doc = store.memorize("a job that kills its worker every time", MemoryFields())
    key = StageKey(doc.id, "atoms", doc.content_hash)
    outcomes = []
    for attempt in range(1, 4):
        now = 1000.0 * attempt
        with store.db.write() as tx:
            assert stages.claim(tx, key, "w", now, 30)
            outcomes.append(stages.reclaim_abandoned(tx, now + 31, ["w"], 3))  # lease ran out
    assert outcomes == [(1, 0), (1, 0), (0, 1)]
    row = rows(store, doc.id)["atoms"]
    assert (row["status"], row["attempts"]) == ("failed", 3)
    assert row["last_error"] == "lease expired 3 times (worker killed or stuck)"
    # The graph stage reads the atoms: it fails with them instead of waiting forever.
    graph_row = rows(store, doc.id)["graph"]
    assert (graph_row["status"], graph_row["last_error"]) == ("failed", "waits for the atoms stage, which failed")
    with store.db.write() as tx:
        assert not stages.claim(tx, key, "w", 9000.0, 30)  # failed stays failed until repair


def test_a_dead_owner_counts_and_another_error_restarts_the_lease_count(store):
    doc = store.memorize("hello", MemoryFields())
    key = StageKey(doc.id, "embed", doc.content_hash)
    with store.db.write() as tx:
        stages.claim(tx, key, "dead", 100.0, 1000)
        assert stages.reclaim_abandoned(tx, 101.0, [], 8) == (1, 0)  # owner dead, lease still on
    assert rows(store, doc.id)["embed"]["last_error"] == "lease expired 1 time (worker killed or stuck)"
    with store.db.write() as tx:
        stages.claim(tx, key, "w", 200.0, 30)
        stages.fail(tx, key, "w", "EmbeddingError: down", 201.0, 8, lambda n: 0.0)
        stages.claim(tx, key, "w", 300.0, 30)
        stages.reclaim_abandoned(tx, 400.0, ["w"], 8)
    row = rows(store, doc.id)["embed"]
    assert (row["status"], row["attempts"]) == ("pending", 3)
    assert row["last_error"] == "lease expired 1 time (worker killed or stuck)"


def test_queue_figures_and_stage_problems_show_stuck_failed_and_retrying(store):
    a, b, c, d = (store.memorize(text, MemoryFields()) for text in ("a", "b", "c", "d"))
    with store.db.write() as tx:
        stages.claim(tx, StageKey(a.id, "embed", a.content_hash), "w", 100.0, 30)  # stuck at 200
        stages.claim(tx, StageKey(b.id, "embed", b.content_hash), "w", 190.0, 30)  # running fine
        key = StageKey(c.id, "embed", c.content_hash)
        stages.claim(tx, key, "w", 100.0, 30)
        stages.fail(tx, key, "w", "ValueError: bad", 101.0, 1, lambda n: 0.0)  # failed for good
        key = StageKey(d.id, "embed", d.content_hash)
        stages.claim(tx, key, "w", 100.0, 30)
        stages.fail(tx, key, "w", "EmbeddingError: down", 101.0, 8, lambda n: 5.0)  # retrying
    figures = stages.queue_figures(store.db.connection(), 200.0)
    assert (figures["running"], figures["stuck"], figures["failed"], figures["retrying"]) == (2, 1, 1, 1)
    assert figures["pending"] == 4 * 3 - 4 + 1
    problems = stages.stage_problems(store.db.connection(), 200.0, 10)
    assert [(p["memory_id"], p["stage"], p["status"], p["attempts"]) for p in problems] == [
        (c.id, "embed", "failed", 1), (a.id, "embed", "stuck", 1)]  # oldest trouble first
    assert problems[0]["last_error"] == "ValueError: bad" and problems[0]["age_s"] == 99.0
    assert problems[1]["last_error"] == "lease held by w expired 70 s ago" and problems[1]["age_s"] == 70.0
    assert [tuple(r) for r in stages.failed_stages(store.db.connection())] == [(c.id, "embed", 1, "ValueError: bad")]
    assert len(stages.stage_problems(store.db.connection(), 200.0, 1)) == 1


def test_graph_waits_for_the_atoms_of_its_version_and_runs_again_after_them(store):
    doc = store.memorize("I moved to Lisbon last year", MemoryFields())
    atoms_key = StageKey(doc.id, "atoms", doc.content_hash)
    graph_key = StageKey(doc.id, "graph", doc.content_hash)
    with store.db.write() as tx:
        assert not stages.claim(tx, graph_key, "w", 10.0, 30)  # atoms not done yet
        assert stages.claim_more(tx, "graph", "w", 10.0, 30, 10) == []
        assert stages.claim(tx, atoms_key, "w", 10.0, 30)
        assert stages.complete(tx, atoms_key, "w", 11.0)
        assert stages.claim(tx, graph_key, "w", 12.0, 30)
        assert stages.complete(tx, graph_key, "w", 13.0)
    # The atoms stage runs again (a repair): what the graph made of the old atoms is stale.
    with store.db.write() as tx:
        stages.restart(tx, doc.id, "atoms", doc.content_hash, 20.0)
        assert not stages.claim(tx, graph_key, "w", 21.0, 30)
        assert stages.claim(tx, atoms_key, "w", 21.0, 30)
        assert stages.complete(tx, atoms_key, "w", 22.0)
    graph_row = rows(store, doc.id)["graph"]
    assert (graph_row["status"], graph_row["attempts"], graph_row["enqueued_time"]) == ("pending", 0, None)
