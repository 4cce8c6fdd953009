"""The stage journal: leases, idempotent completion, backoff, failure and reclaiming."""

from __future__ import annotations

import os
import socket

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import WorkerHere, store_sql, write_config
from shared.assembly import open_services
from shared.config import AppConfig, StorageConfig
from shared.store.model.documents import MemoryFields
from shared.store.model.stages import StageKey


@pytest.fixture
def service(tmp_path):
    services = open_services(AppConfig(storage=StorageConfig(data_dir=tmp_path)), queued=False)
    yield services.memories
    services.close()


def rows(service, memory_id):
    return {r["stage"]: dict(r) for r in store_sql(
        service.store, "SELECT * FROM memory_stages WHERE memory_id = ?", (memory_id,))}


def test_memorize_journals_three_pending_stages(service):
    doc = service.memorize("hello", MemoryFields())
    got = rows(service, doc.id)
    assert sorted(got) == ["atoms", "embed", "graph"]
    assert {r["status"] for r in got.values()} == {"pending"}
    assert {r["content_hash"] for r in got.values()} == {doc.content_hash}


def test_claim_is_exclusive_and_completion_needs_the_lease(service):
    doc = service.memorize("hello", MemoryFields())
    key = StageKey(doc.id, "embed", doc.content_hash)
    with service.store.write() as tx:
        assert tx.stages.claim(key, "w1", 100.0, 30)
        assert not tx.stages.claim(key, "w2", 100.0, 30)
        assert not tx.stages.complete(key, "w2", 101.0)
        assert tx.stages.complete(key, "w1", 101.0)
        assert not tx.stages.claim(key, "w2", 102.0, 30)  # done stays done
    assert rows(service, doc.id)["embed"]["attempts"] == 1


def test_edit_makes_old_jobs_harmless(service):
    doc = service.memorize("I live in Beijing", MemoryFields())
    old = StageKey(doc.id, "embed", doc.content_hash)
    with service.store.write() as tx:
        assert tx.stages.claim(old, "w1", 100.0, 30)
    edited = service.edit(doc.id, "I live in Shanghai", {})
    with service.store.write() as tx:
        assert not tx.stages.complete(old, "w1", 101.0)  # result for the old text is dropped
        assert not tx.stages.claim(old, "w1", 101.0, 30)
        assert tx.stages.claim(StageKey(doc.id, "embed", edited.content_hash), "w1", 101.0, 30)


def test_failures_back_off_then_fail_for_good(service):
    doc = service.memorize("hello", MemoryFields())
    key = StageKey(doc.id, "embed", doc.content_hash)
    delays = []
    for attempt in range(1, 4):
        now = 1000.0 * attempt
        with service.store.write() as tx:
            assert tx.stages.claim(key, "w", now, 30)
            delays.append(tx.stages.fail(key, "w", "boom", now, 3, lambda n: 5.0 * 2 ** (n - 1)))
        if attempt < 3:
            with service.store.write() as tx:  # still backing off: not claimable yet
                assert not tx.stages.claim(key, "w", now + 1.5, 30)
    assert delays == [5.0, 10.0, None]
    row = rows(service, doc.id)["embed"]
    assert (row["status"], row["attempts"], row["last_error"]) == ("failed", 3, "boom")
    # The graph stage reads the memory's vectors: it fails with the embed stage, and is retried with it.
    assert rows(service, doc.id)["graph"]["status"] == "failed"
    with service.store.write() as tx:
        assert tx.stages.retry_failed(5000.0) == 2
        assert tx.stages.claim(key, "w", 5000.0, 30)


def test_reclaim_takes_back_leases_of_dead_or_expired_workers(service):
    a = service.memorize("a", MemoryFields())
    b = service.memorize("b", MemoryFields())
    with service.store.write() as tx:
        tx.stages.claim(StageKey(a.id, "embed", a.content_hash), "alive", 100.0, 1000)
        tx.stages.claim(StageKey(b.id, "embed", b.content_hash), "dead", 100.0, 1000)
        assert tx.stages.reclaim_abandoned(200.0, ["alive"], 8) == (1, 0)
        assert tx.stages.reclaim_abandoned(2000.0, ["alive"], 8) == (1, 0)  # lease ran out
    assert rows(service, a.id)["embed"]["status"] == rows(service, b.id)["embed"]["status"] == "pending"


def test_live_workers_ignore_a_killed_local_process(service):
    import os

    with service.store.write() as tx:
        tx.runtime.beat("me", os.getpid(), __import__("socket").gethostname(), 100.0)
        tx.runtime.beat("ghost", 2 ** 22 + 12345, __import__("socket").gethostname(), 100.0)
        tx.runtime.beat("remote", 1, "another-host", 100.0)
    assert sorted(service.store.runtime.live_workers(50.0)) == ["me", "remote"]
    assert service.store.runtime.live_workers(150.0) == []


def test_periodic_claim_runs_once_per_due_time(service):
    def claim(now):
        return tx.runtime.claim_periodic_run("job", 60, now, "me", os.getpid(), socket.gethostname(), 60)

    with service.store.write() as tx:
        assert claim(1000.0) == (True, None)
        tx.runtime.finish_periodic_run("job", "me", 1000.0)
        assert claim(1030.0) == (False, 1000.0)
        assert claim(1500.0) == (True, 1000.0)


def test_leases_that_keep_running_out_end_in_failed(service):
    doc = service.memorize("a job that kills its worker every time", MemoryFields())
    key = StageKey(doc.id, "atoms", doc.content_hash)
    outcomes = []
    for attempt in range(1, 4):
        now = 1000.0 * attempt
        with service.store.write() as tx:
            assert tx.stages.claim(key, "w", now, 30)
            outcomes.append(tx.stages.reclaim_abandoned(now + 31, ["w"], 3))  # lease ran out
    assert outcomes == [(1, 0), (1, 0), (0, 1)]
    row = rows(service, doc.id)["atoms"]
    assert (row["status"], row["attempts"]) == ("failed", 3)
    assert row["last_error"] == "lease expired 3 times (worker killed or stuck)"
    # The graph stage reads the atoms: it fails with them instead of waiting forever.
    graph_row = rows(service, doc.id)["graph"]
    assert (graph_row["status"], graph_row["last_error"]) == ("failed", "waits for the atoms stage, which failed")
    with service.store.write() as tx:
        assert not tx.stages.claim(key, "w", 9000.0, 30)  # failed stays failed until repair


def test_a_dead_owner_counts_and_another_error_restarts_the_lease_count(service):
    doc = service.memorize("hello", MemoryFields())
    key = StageKey(doc.id, "embed", doc.content_hash)
    with service.store.write() as tx:
        tx.stages.claim(key, "dead", 100.0, 1000)
        assert tx.stages.reclaim_abandoned(101.0, [], 8) == (1, 0)  # owner dead, lease still on
    assert rows(service, doc.id)["embed"]["last_error"] == "lease expired 1 time (worker killed or stuck)"
    with service.store.write() as tx:
        tx.stages.claim(key, "w", 200.0, 30)
        tx.stages.fail(key, "w", "EmbeddingError: down", 201.0, 8, lambda n: 0.0)
        tx.stages.claim(key, "w", 300.0, 30)
        tx.stages.reclaim_abandoned(400.0, ["w"], 8)
    row = rows(service, doc.id)["embed"]
    assert (row["status"], row["attempts"]) == ("pending", 3)
    assert row["last_error"] == "lease expired 1 time (worker killed or stuck)"


def test_queue_figures_and_stage_problems_show_stuck_failed_and_retrying(service):
    a, b, c, d = (service.memorize(text, MemoryFields()) for text in ("a", "b", "c", "d"))
    with service.store.write() as tx:
        tx.stages.claim(StageKey(a.id, "embed", a.content_hash), "w", 100.0, 30)  # stuck at 200
        tx.stages.claim(StageKey(b.id, "embed", b.content_hash), "w", 190.0, 30)  # running fine
        key = StageKey(c.id, "embed", c.content_hash)
        tx.stages.claim(key, "w", 100.0, 30)
        tx.stages.fail(key, "w", "ValueError: bad", 101.0, 1, lambda n: 0.0)  # failed for good
        key = StageKey(d.id, "embed", d.content_hash)
        tx.stages.claim(key, "w", 100.0, 30)
        tx.stages.fail(key, "w", "EmbeddingError: down", 101.0, 8, lambda n: 5.0)  # retrying
    figures = service.store.stages.queue_figures(200.0)
    # c's graph stage, which reads its vectors, failed with its embed stage.
    assert (figures["running"], figures["stuck"], figures["failed"], figures["retrying"]) == (2, 1, 2, 1)
    assert figures["pending"] == 4 * 3 - 5 + 1
    problems = service.store.stages.stage_problems(200.0, 10)
    assert [(p["memory_id"], p["stage"], p["status"], p["attempts"]) for p in problems] == [
        (c.id, "embed", "failed", 1), (c.id, "graph", "failed", 0), (a.id, "embed", "stuck", 1)]  # oldest first
    assert problems[0]["last_error"] == "ValueError: bad" and problems[0]["age_s"] == 99.0
    assert problems[1]["last_error"] == "waits for the embed stage, which failed"
    assert problems[2]["last_error"] == "lease held by w expired 70 s ago" and problems[2]["age_s"] == 70.0
    assert [tuple(r) for r in service.store.stages.failed_stages()] == [
        (c.id, "embed", 1, "ValueError: bad"), (c.id, "graph", 0, "waits for the embed stage, which failed")]
    assert len(service.store.stages.stage_problems(200.0, 1)) == 1


def test_graph_waits_for_the_atoms_of_its_version_and_runs_again_after_them(service):
    doc = service.memorize("I moved to Lisbon last year", MemoryFields())
    atoms_key = StageKey(doc.id, "atoms", doc.content_hash)
    graph_key = StageKey(doc.id, "graph", doc.content_hash)
    embed_key = StageKey(doc.id, "embed", doc.content_hash)
    with service.store.write() as tx:
        assert tx.stages.claim(embed_key, "w", 10.0, 30) and tx.stages.complete(embed_key, "w", 10.0)
        assert not tx.stages.claim(graph_key, "w", 10.0, 30)  # atoms not done yet
        assert tx.stages.claim_more("graph", "w", 10.0, 30, 10) == []
        assert tx.stages.claim(atoms_key, "w", 10.0, 30)
        assert tx.stages.complete(atoms_key, "w", 11.0)
        assert tx.stages.claim(graph_key, "w", 12.0, 30)
        assert tx.stages.complete(graph_key, "w", 13.0)
    # The atoms stage runs again (a repair): what the graph made of the old atoms is stale.
    with service.store.write() as tx:
        tx.stages.restart(doc.id, "atoms", doc.content_hash, 20.0)
        assert not tx.stages.claim(graph_key, "w", 21.0, 30)
        assert tx.stages.claim(atoms_key, "w", 21.0, 30)
        assert tx.stages.complete(atoms_key, "w", 22.0)
    graph_row = rows(service, doc.id)["graph"]
    assert (graph_row["status"], graph_row["attempts"], graph_row["enqueued_time"]) == ("pending", 0, None)



def test_a_worker_embeds_every_waiting_memory_before_any_later_stage(tmp_path):
    """A burst of memories is found by meaning once the embedder has been through them; their
    facts and graph entries follow. The first queue message, for the first memory, leaves no
    memory waiting to be embedded (in batches of queue.embed_batch_size) before its own atoms
    and graph stages run."""
    with FakeEmbeddingsServer(dim=8) as api:
        config = write_config(tmp_path, queue={"embed_batch_size": 4}, embedding={
            "provider": "openai", "base_url": api.base_url, "model": "fake", "dimensions": 8})
        worker = WorkerHere(config)
        try:
            memories = worker.service.services.memories
            docs = [memories.memorize(f"note {n} about the garden shed", MemoryFields()) for n in range(10)]
            first = docs[0]
            worker.service.runner.process(first.id, first.content_hash, ["embed", "atoms", "graph"])
            status = {(r["memory_id"], r["stage"]): r["status"] for r in store_sql(
                memories.store, "SELECT memory_id, stage, status FROM memory_stages")}
        finally:
            worker.close()
    assert {status[(d.id, "embed")] for d in docs} == {"done"}
    assert (status[(first.id, "atoms")], status[(first.id, "graph")]) == ("done", "done")
    assert api.requests >= 3  # ten memories in batches of four
