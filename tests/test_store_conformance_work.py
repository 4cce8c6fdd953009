"""Store conformance (tests/store_conformance.py): the stage journal and its leases, meta,
process heartbeats and periodic jobs, usage, consistency checks, conversation neighbours."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

from shared.store.model import meta
from shared.store.model.documents import MemoryFields
from shared.store.model.stages import StageKey
from shared.store.model.vectors import VectorRow
from store_conformance import NOW, add, in_threads, key, opened, store  # noqa: F401 (the fixtures)

# -- stages ------------------------------------------------------------------------------


def test_stage_claim_complete_and_the_lease(store):
    memory_id = add(store, "a memory")
    k = key(store, memory_id)
    with store.write() as tx:
        assert tx.stages.claim(k, "w1", NOW, 60)
        assert not tx.stages.claim(k, "w2", NOW, 60)
        assert not tx.stages.complete(k, "w2", NOW)
        assert tx.stages.complete(k, "w1", NOW)
    assert store.stages.is_done(memory_id, "embed", k.content_hash)
    assert store.stages.done_among([memory_id, 999], "embed") == {memory_id}
    assert store.stages.done_among([memory_id], "atoms") == set()


def test_the_graph_stage_waits_for_the_atoms_and_embed_stages(store):
    memory_id = add(store, "a memory")
    graph, atoms, embed = (key(store, memory_id, stage) for stage in ("graph", "atoms", "embed"))
    assert not store.stages.claim(graph, "w", NOW, 60)
    assert store.stages.claim(atoms, "w", NOW, 60) and store.stages.complete(atoms, "w", NOW)
    assert not store.stages.claim(graph, "w", NOW, 60)  # its entries take the memory's vectors
    assert store.stages.claim(embed, "w", NOW, 60) and store.stages.complete(embed, "w", NOW)
    assert store.stages.claim(graph, "w", NOW, 60)


def test_a_stage_that_reads_a_failed_one_stays_failed_when_another_it_reads_is_done(store):
    memory_id = add(store, "a memory")
    graph, atoms, embed = (key(store, memory_id, stage) for stage in ("graph", "atoms", "embed"))
    assert store.stages.claim(embed, "w", NOW, 60)
    assert store.stages.fail(embed, "w", "boom", NOW, 1, lambda attempts: 30.0) is None
    assert store.stages.claim(atoms, "w", NOW, 60) and store.stages.complete(atoms, "w", NOW)
    # Pending again it would wait forever for the embed stage: it stays failed, and is retried with it.
    assert [(r["stage"], r["status"]) for r in store.stages.of_memory(memory_id) if r["stage"] == "graph"] == [
        ("graph", "failed")]
    assert store.stages.retry_failed(NOW + 1) == 2
    assert store.stages.claim(embed, "w", NOW + 1, 60) and store.stages.complete(embed, "w", NOW + 1)
    assert store.stages.claim(graph, "w", NOW + 1, 60)


def test_a_failing_stage_backs_off_then_fails_for_good(store):
    memory_id = add(store, "a memory")
    k = key(store, memory_id)
    assert store.stages.claim(k, "w", NOW, 60)
    assert store.stages.fail(k, "w", "boom", NOW, 2, lambda attempts: 30.0) == 30.0
    assert [r["retry_in_s"] for r in store.stages.retrying_stages(NOW)] == [30.0]
    assert not store.stages.claim(k, "w", NOW + 10, 60)  # still backing off
    assert store.stages.claim(k, "w", NOW + 30, 60)
    assert store.stages.fail(k, "w", "boom again", NOW + 31, 2, lambda attempts: 30.0) is None
    # The graph stage, which reads the memory's vectors, fails with it rather than wait forever.
    assert sorted(tuple(r) for r in store.stages.failed_stages()) == [
        (memory_id, "embed", 2, "boom again"), (memory_id, "graph", 0, "waits for the embed stage, which failed")]
    assert [p["status"] for p in store.stages.stage_problems(NOW + 40)] == ["failed", "failed"]
    assert store.stages.retry_failed(NOW + 50) == 2 and store.stages.claim(k, "w", NOW + 50, 60)


def test_two_threads_never_both_claim_or_complete_one_stage(store):
    keys = [key(store, add(store, f"memory {n}")) for n in range(8)]
    start = threading.Barrier(2)

    def worker(owner: str, order: list[StageKey]):  # the two meet halfway
        start.wait()
        won = []
        for k in order:
            with store.write() as tx:
                if tx.stages.claim(k, owner, NOW, 60):
                    won.append(k.memory_id)
        return won, [k.memory_id for k in order if store.stages.complete(k, owner, NOW)]

    (won_a, done_a), (won_b, done_b) = in_threads(lambda: worker("a", keys), lambda: worker("b", keys[::-1]))
    assert sorted(won_a + won_b) == [k.memory_id for k in keys] and not set(won_a) & set(won_b)
    assert (done_a, done_b) == (won_a, won_b)


def test_concurrent_claim_more_hands_each_stage_to_one_worker(store):
    ids = [add(store, f"memory {n}") for n in range(10)]
    start = threading.Barrier(2)

    def worker(owner: str):
        start.wait()
        with store.write() as tx:
            return [k.memory_id for k in tx.stages.claim_more("embed", owner, NOW, 60, 6)]

    a, b = in_threads(lambda: worker("a"), lambda: worker("b"))
    assert sorted([len(a), len(b)]) == [4, 6]
    assert not set(a) & set(b) and sorted(a + b) == ids


def test_reconcile_takes_back_dead_leases_and_queues_what_waits(store):
    first, second = add(store, "one"), add(store, "two")
    assert store.stages.ready_to_enqueue(NOW, include_enqueued=False) == []  # queued when stored
    with store.write() as tx:
        tx.stages.mark_enqueued([key(store, second)], None)  # the enqueue failed
    assert store.stages.ready_to_enqueue(NOW, include_enqueued=False) == [key(store, second)]
    assert len(store.stages.ready_to_enqueue(NOW, include_enqueued=True)) == 6
    assert store.stages.claim(key(store, first), "dead", NOW, 60)
    assert store.stages.claim(key(store, second), "alive", NOW, 60)
    assert store.stages.reclaim_abandoned(NOW + 1, ["alive"], 5) == (1, 0)
    assert store.stages.queue_figures(NOW + 1)["running"] == 1
    assert store.stages.reclaim_abandoned(NOW + 61, ["alive"], 1) == (0, 1)  # lease ran out, no attempts left


def test_an_edit_makes_old_stage_work_harmless(store):
    memory_id = add(store, "first version")
    old = key(store, memory_id)
    assert store.stages.claim(old, "w", NOW, 60)
    with store.write() as tx:
        tx.documents.update(memory_id, "second version", "second version", MemoryFields(), NOW)
        tx.stages.reset_for_memory(memory_id, tx.documents.get(memory_id).content_hash, NOW)
    assert not store.stages.complete(old, "w", NOW)
    assert store.stages.claim(key(store, memory_id), "w", NOW, 60)
    assert store.stages.restart_stage("embed", NOW) == 1
    with store.write() as tx:
        tx.stages.restart(memory_id, "atoms", old.content_hash, NOW)
    assert {r["stage"]: r["content_hash"] == old.content_hash for r in store.stages.of_memory(memory_id)}["atoms"]
    assert store.stages.delete_for_memory(memory_id, NOW) == {"memory_stages": 3}


def test_queue_figures_count_stages_by_status(store):
    ids = [add(store, f"m{n}") for n in range(2)]
    store.stages.claim(key(store, ids[0]), "w", NOW, 60)
    store.stages.complete(key(store, ids[0]), "w", NOW)
    store.stages.claim(key(store, ids[1]), "w", NOW, 60)
    figures = store.stages.queue_figures(NOW + 100)
    assert (figures["pending"], figures["running"], figures["done"], figures["failed"]) == (4, 1, 1, 0)
    assert figures["stuck"] == 1 and figures["oldest_pending_age_s"] == 100.0
    # ids[0]'s embed done, ids[1]'s running: both still wait for atoms and graph.
    assert store.stages.waiting_by_stage() == {"embed": 1, "atoms": 2, "graph": 2}


def test_done_since_counts_a_stage_done_from_a_time_on(store):
    ids = [add(store, f"m{n}") for n in range(4)]
    for memory_id, done_at in zip(ids[:3], (NOW + 10, NOW + 20, NOW + 30)):
        assert store.stages.claim(key(store, memory_id), "w", NOW, 60)
        assert store.stages.complete(key(store, memory_id), "w", done_at)
    assert store.stages.claim(key(store, ids[3]), "w", NOW + 40, 60)  # running, not done
    atoms = key(store, ids[0], "atoms")
    assert store.stages.claim(atoms, "w", NOW, 60) and store.stages.complete(atoms, "w", NOW + 50)
    assert [store.stages.done_since("embed", since) for since in (NOW, NOW + 20, NOW + 30.5)] == [3, 2, 0]
    assert store.stages.done_since("atoms", NOW + 20) == 1 and store.stages.done_since("graph", NOW) == 0
    # An edit puts a done row back to pending: it no longer counts.
    with store.write() as tx:
        tx.documents.update(ids[2], "m2 edited", "m2 edited", MemoryFields(), NOW + 60)
        tx.stages.reset_for_memory(ids[2], tx.documents.get(ids[2]).content_hash, NOW + 60)
    assert store.stages.done_since("embed", NOW) == 2


# -- meta, runtime, usage ----------------------------------------------------------------


def test_meta_values_store_id_and_recall_epoch(store):
    assert store.meta.get(meta.DECAY_APPLIED_AT) is None
    store.meta.put(meta.DECAY_APPLIED_AT, NOW)
    assert store.meta.get(meta.DECAY_APPLIED_AT) == NOW
    with pytest.raises(KeyError):
        store.meta.get("no_such_key")
    assert store.meta.store_id() is None
    made = store.meta.ensure_store_id()
    assert made > 0 and store.meta.ensure_store_id() == store.meta.store_id() == made
    epoch = store.meta.recall_epoch()
    memory_id = add(store, "a")
    after_write = store.meta.recall_epoch()
    with store.write() as tx:
        tx.vectors.upsert(VectorRow("document", memory_id, memory_id, "m", np.ones(3, np.float32) / 3 ** 0.5, "h"), NOW)
    assert epoch < after_write < store.meta.recall_epoch()


def test_worker_heartbeats_and_liveness(store):
    here = socket.gethostname()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    store.runtime.beat("me", os.getpid(), here, NOW)
    store.runtime.beat("dead", gone.pid, here, NOW)
    store.runtime.beat("elsewhere", 1, "another-host", NOW - 100)
    assert store.runtime.live_workers(NOW - 10) == ["me"]
    assert sorted(store.runtime.live_workers(NOW - 200)) == ["elsewhere", "me"]
    store.runtime.mark_autostarted("me")
    store.runtime.beat("me", os.getpid(), here, NOW + 5)
    rows = {r.id: r for r in store.runtime.worker_rows()}
    assert (rows["me"].kind, rows["me"].heartbeat_time, rows["me"].started_time) == ("autostarted", NOW + 5, NOW)
    assert store.runtime.newest_heartbeat() == NOW + 5
    store.runtime.mark_stopping("me")
    assert store.runtime.live_workers(NOW) == []
    assert store.runtime.last_worker_gone() is None
    assert store.runtime.prune_workers(NOW - 50) == 1
    assert store.runtime.last_worker_gone() == NOW - 100  # the pruned one's last beat
    store.runtime.remove_worker("me")
    assert [r.id for r in store.runtime.worker_rows()] == ["dead"]
    stopped = store.runtime.last_worker_gone()  # when "me" stopped: now, not its last beat
    assert stopped > NOW + 5 and store.runtime.newest_heartbeat() == stopped
    store.runtime.remove_worker("dead")
    assert store.runtime.prune_workers(NOW + 10 ** 9) == 0  # nothing left: the time stays
    assert store.runtime.worker_rows() == [] and store.runtime.newest_heartbeat() >= stopped


def test_front_heartbeats_and_pruning(store):
    store.runtime.front_beat("f1", os.getpid(), socket.gethostname(), "http", NOW, "http://127.0.0.1:8766/mcp")
    store.runtime.front_beat("f2", os.getpid(), socket.gethostname(), "stdio", NOW - 100)
    assert [(f.id, f.kind, f.endpoint) for f in store.runtime.live_fronts(NOW - 10)] == [
        ("f1", "http", "http://127.0.0.1:8766/mcp")]
    store.runtime.front_beat("f1", os.getpid(), socket.gethostname(), "http", NOW + 1)
    assert [f.endpoint for f in store.runtime.front_rows()] == ["http://127.0.0.1:8766/mcp", None]
    assert store.runtime.prune_fronts(NOW - 10) == 1
    store.runtime.remove_front("f1")
    assert store.runtime.front_rows() == []


def claim(store, owner: str, now: float, pid: int | None = None, lease_s: float = 3600.0):
    with store.write() as tx:
        return tx.runtime.claim_periodic_run("decay", 60, now, owner, pid or os.getpid(),
                                             socket.gethostname(), lease_s)


def test_a_periodic_job_runs_once_per_due_time_and_counts_only_when_finished(store):
    start = threading.Barrier(3)

    def claim_in_thread(owner):
        start.wait()
        return claim(store, owner, NOW)[0]

    won = in_threads(*[lambda o=o: claim_in_thread(o) for o in ("a", "b", "c")])
    assert sorted(won) == [False, False, True]
    winner = "abc"[won.index(True)]
    assert store.runtime.periodic_runs() == {}  # claimed, not yet run
    assert store.runtime.periodic_claims() == {"decay": winner}
    store.runtime.finish_periodic_run("decay", winner, NOW)
    assert store.runtime.periodic_runs() == {"decay": NOW} and store.runtime.periodic_claims() == {}
    assert claim(store, "a", NOW + 30) == (False, NOW)
    assert claim(store, "a", NOW + 60) == (True, NOW)
    store.runtime.release_periodic_run("decay", "a")  # that run failed: due again, nothing recorded
    assert store.runtime.periodic_runs() == {"decay": NOW} and store.runtime.periodic_claims() == {}


def test_a_periodic_claim_of_a_dead_process_or_past_its_lease_is_taken_over(store):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert claim(store, "killed", NOW, pid=dead.pid) == (True, None)
    assert claim(store, "next", NOW + 1) == (True, None)  # its process is gone
    assert store.runtime.periodic_claims() == {"decay": "next"}
    assert claim(store, "third", NOW + 2) == (False, None)  # "next" (this process) is alive
    assert claim(store, "third", NOW + 3601 + 1) == (True, None)  # its lease has passed
    store.runtime.finish_periodic_run("decay", "next", NOW + 1)  # a late finish of a lost claim
    assert store.runtime.periodic_claims() == {"decay": "third"}  # does not drop the new claim


def test_a_renewed_claim_outlives_its_first_lease_and_one_of_another_host_is_taken_over_after_it(store):
    with store.write() as tx:  # a claimer on another host: its pid cannot be checked from here
        assert tx.runtime.claim_periodic_run("decay", 60, NOW, "far", 1, "another-host", 120) == (True, None)
    assert store.runtime.renew_periodic_claim("decay", "far", NOW + 100 + 120)  # still running
    assert claim(store, "near", NOW + 130) == (False, None)  # renewed: not taken over
    assert not store.runtime.renew_periodic_claim("decay", "someone else", NOW + 500)
    assert claim(store, "near", NOW + 100 + 121) == (True, None)  # renewals stopped: taken over
    assert not store.runtime.renew_periodic_claim("decay", "far", NOW + 400)  # the claim is gone
    assert store.runtime.periodic_claims() == {"decay": "near"}


def test_usage_counts_calls_and_tokens_per_model(store):
    store.usage.record("gpt", 100, 20, False, NOW)
    store.usage.record("gpt", 50, 0, True, NOW + 1)
    assert store.usage.figures() == {"gpt": {"calls": 2, "prompt_tokens": 150, "completion_tokens": 20,
                                             "failures": 1}}


# -- consistency and neighbours ----------------------------------------------------------


def test_missing_outputs_are_found_and_redone(store):
    bare, embedded = add(store, "no stage rows", stages=False), add(store, "embedded without a vector")
    k = key(store, embedded)
    assert store.stages.claim(k, "w", NOW, 60) and store.stages.complete(k, "w", NOW)
    missing = store.consistency.missing_outputs("m")
    assert (missing["stage rows"], missing["vectors"]) == ([bare], [embedded])
    assert store.consistency.redo_missing(missing, NOW) == 2
    assert len(store.stages.of_memory(bare)) == 3 and not store.stages.is_done(embedded, "embed", k.content_hash)
    counts = store.consistency.table_counts()
    assert (counts["documents"], counts["documents_fts"], counts["memory_stages"], counts["vectors"]) == (2, 2, 6, 0)


def test_neighbours_link_read_and_unlink(store):
    one, two = add(store, "one", session_id="s"), add(store, "two", session_id="s", now=NOW + 10)
    three = add(store, "three", session_id="s", now=NOW + 20)
    assert store.neighbours.before("p", "s", NOW + 30, 5, 60) == []  # persona differs
    assert store.neighbours.before(None, "s", NOW + 30, 5, 60) == [(three, "three"), (two, "two"), (one, "one")]
    assert store.neighbours.before(None, "s", NOW + 30, 5, 60, before_id=three) == [(two, "two"), (one, "one")]
    assert store.neighbours.before(None, "s", NOW + 30, 5, 5) == []  # the gap is too long
    with store.write() as tx:
        tx.neighbours.link(three, [two, one])
    assert store.neighbours.of(three) == [(two, "two"), (one, "one")]
    assert store.neighbours.dependents(two) == [three]
    assert store.neighbours.texts_of([three, one]) == {three: ["two", "one"], one: []}
    assert store.neighbours.unlink(two) == [three]
    assert store.neighbours.of(three) == [(one, "one")]
