"""Failure paths that end: every failed attempt is recorded, backs off and ends in `failed`;
a locked database gives leases back once it is writable again (not when they expire);
background threads outlive any error."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from contextlib import contextmanager

import pytest

from aokun_worker.handlers import EmbedHandler
from aokun_worker.heartbeat import Heartbeat
from aokun_worker.periodic import PeriodicJob, PeriodicScheduler
from aokun_worker.runner import RunnerParts, StageRunner
from fake_openai import FakeEmbeddingsServer
from helpers import db_rows, start_worker, stop, store_sql, wait_for, write_config
from shared.assembly import open_services
from shared.config import AppConfig, EmbeddingConfig, QueueConfig, StorageConfig, load_config
from shared.embedders import build_embedder
from shared.reconcile import reconcile
from shared.store.model.documents import MemoryFields
from shared.store.model.stages import StageKey

DIM = 16
ABORT_VECTORS = "CREATE TRIGGER abort_vectors BEFORE INSERT ON vectors {when} BEGIN SELECT RAISE(ABORT, 'boom'); END"


@pytest.fixture
def fake_api():
    with FakeEmbeddingsServer(dim=DIM) as server:
        yield server


@pytest.fixture
def services(tmp_path):
    """A store whose writers wait 0.2 s for a lock, and the memory service on it (no queue)."""
    services = open_services(AppConfig(storage=StorageConfig(data_dir=tmp_path, busy_timeout_ms=200)), queued=False)
    yield services
    services.close()


def embed_runner(store, fake_api, **queue) -> StageRunner:
    """The real runner with the real embed stage, embedding through a local HTTP API."""
    embedder = build_embedder(EmbeddingConfig(provider="openai", base_url=fake_api.base_url,
                                              model="fake-embed", dimensions=DIM, api_key="sk-test",
                                              max_retries=0), threads=1)
    parts = RunnerParts(store=store, handlers={"embed": EmbedHandler(embedder, 8)}, queue=QueueConfig(**queue),
                        owner="test-worker")
    return StageRunner(parts)


def stage_row(store, memory_id: int, stage: str = "embed") -> dict:
    [row] = store_sql(store, "SELECT * FROM memory_stages WHERE memory_id = ? AND stage = ?", (memory_id, stage))
    return dict(row)


@contextmanager
def write_lock(path):
    """Hold the database's write lock from another connection, as a long writer would."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def test_a_store_step_that_raises_backs_off_then_fails_with_its_error(services, fake_api):
    doc = services.memories.memorize("a memory whose vector cannot be stored", MemoryFields())
    store_sql(services.store, ABORT_VECTORS.format(when=""))
    runner = embed_runner(services.store, fake_api, max_retries=3, retry_base_s=0.01, retry_max_s=0.03)
    key = StageKey(doc.id, "embed", doc.content_hash)
    backoffs = []
    for attempt in (1, 2, 3):
        assert runner.run(key) == 0
        row = stage_row(services.store, doc.id)
        assert row["attempts"] == attempt and row["lease_owner"] is None
        assert row["last_error"] == "IntegrityError: boom"
        backoffs.append(round(row["next_attempt_time"] - row["update_time"], 3))
        time.sleep(0.05)
    assert row["status"] == "failed"
    assert backoffs[:2] == [0.01, 0.02]  # doubling; the third attempt is the last
    assert store_sql(services.store, "SELECT COUNT(*) FROM vectors")[0][0] == 0
    problems = services.store.stages.stage_problems(time.time(), 10)
    assert [(p["memory_id"], p["stage"], p["status"], p["attempts"], p["last_error"]) for p in problems] == [
        (doc.id, "embed", "failed", 3, "IntegrityError: boom"),
        (doc.id, "graph", "failed", 0, "waits for the embed stage, which failed")]  # it reads the vectors


def test_one_row_that_cannot_be_stored_fails_only_its_own_stage(services, fake_api):
    service = services.memories
    docs = [service.memorize(f"batch member {i}", MemoryFields()) for i in range(3)]
    store_sql(services.store, ABORT_VECTORS.format(when=f"WHEN NEW.memory_id = {docs[1].id}"))
    runner = embed_runner(services.store, fake_api, retry_base_s=5)
    assert runner.run(StageKey(docs[0].id, "embed", docs[0].content_hash)) == 2
    assert [stage_row(services.store, d.id)["status"] for d in docs] == ["done", "pending", "done"]
    assert stage_row(services.store, docs[1].id)["last_error"] == "IntegrityError: boom"
    vectors = store_sql(services.store, "SELECT memory_id FROM vectors ORDER BY memory_id")
    assert [r[0] for r in vectors] == [docs[0].id, docs[2].id]


def test_a_document_that_cannot_be_read_is_recorded_on_its_stage(services, fake_api):
    doc = services.memories.memorize("a row damaged on disk", MemoryFields())
    store_sql(services.store, "UPDATE documents SET topics = '{not json' WHERE id = ?", (doc.id,))
    assert embed_runner(services.store, fake_api).run(StageKey(doc.id, "embed", doc.content_hash)) == 0
    row = stage_row(services.store, doc.id)
    assert (row["status"], row["attempts"], row["lease_owner"]) == ("pending", 1, None)
    assert row["last_error"].startswith("JSONDecodeError:")
    assert fake_api.requests == 0


def _run_in_thread(runner, key):
    outcome = {}

    def run():
        outcome["done"] = runner.run(key)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_short_lock_at_completion_is_waited_out(services, fake_api):
    doc = services.memories.memorize("stored once the writer lets go", MemoryFields())
    fake_api.delay_s = 0.5
    thread, outcome = _run_in_thread(embed_runner(services.store, fake_api),
                                     StageKey(doc.id, "embed", doc.content_hash))
    wait_for(lambda: fake_api.requests == 1, 60, interval=0.01, what="the embedding request")
    # Held past busy_timeout (0.2 s) when the result comes back, then let go.
    with write_lock(services.store.location):
        time.sleep(fake_api.delay_s + 0.4)
    thread.join(60)
    assert outcome.get("done") == 1, "the runner did not finish within 60 s of the lock"
    row = stage_row(services.store, doc.id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("done", 1, None)
    assert fake_api.texts.count(doc.text) == 1  # completed, not computed again


@pytest.mark.slow
def test_a_long_lock_gives_the_lease_back_as_soon_as_the_database_is_writable(services, fake_api, caplog):
    doc = services.memories.memorize("released while the database was locked", MemoryFields())
    fake_api.delay_s = 0.5
    runner = embed_runner(services.store, fake_api, lease_s=300, retry_base_s=0.01)
    thread, outcome = _run_in_thread(runner, StageKey(doc.id, "embed", doc.content_hash))
    wait_for(lambda: fake_api.requests == 1, 60, interval=0.01, what="the embedding request")
    with caplog.at_level("WARNING", logger="aokun.worker"), write_lock(services.store.location):
        # Past busy_timeout and every retry of the completion: the runner turns to giving the
        # lease back, and keeps trying for as long as the lock holds.
        wait_for(lambda: "cannot release 1 embed stage(s)" in caplog.text, 60, what="the completion given up")
        time.sleep(1.0)  # the behaviour: a second of refused tries to give the lease back
        assert stage_row(services.store, doc.id)["status"] == "running"
        assert thread.is_alive()  # still trying to give the lease back, not given up
    # Once writable, the lease is given back: well before it would expire (lease_s 300 s).
    thread.join(60)
    assert "done" in outcome, "the runner still held its lease 60 s after the lock"
    assert outcome["done"] == 0
    row = stage_row(services.store, doc.id)
    assert (row["status"], row["attempts"], row["lease_owner"]) == ("pending", 1, None)
    assert "locked" in row["last_error"] and row["next_attempt_time"] is not None
    time.sleep(0.05)
    assert runner.run(StageKey(doc.id, "embed", doc.content_hash)) == 1
    assert (stage_row(services.store, doc.id)["status"], stage_row(services.store, doc.id)["attempts"]) == ("done", 2)


def test_heartbeat_thread_survives_raw_errors(services, caplog):
    heartbeat = Heartbeat(services.store, interval=0.1)
    heartbeat.start()
    conn = sqlite3.connect(services.store.location, isolation_level=None)  # below the store: triggers

    def last_beat():
        return conn.execute("SELECT heartbeat_time FROM workers WHERE worker_id = ?",
                            (heartbeat.worker_id,)).fetchone()[0]
    try:
        conn.execute("CREATE TRIGGER no_beats BEFORE UPDATE ON workers BEGIN SELECT RAISE(ABORT, 'no'); END")
        wait_for(lambda: any("heartbeat failed" in r.getMessage() for r in caplog.records), 30, 0.02,
                 what="a beat failing with a raw sqlite3.IntegrityError")
        frozen = last_beat()
        conn.execute("DROP TRIGGER no_beats")
        wait_for(lambda: last_beat() > frozen, 60, what="the heartbeat to resume")
    finally:
        heartbeat.stop()
        conn.close()


def test_periodic_jobs_keep_running_when_one_cannot_be_claimed_or_fails(services):
    runs = {"good": 0, "broken": 0}

    def broken(previous, now):
        runs["broken"] += 1
        raise KeyError("a job may fail any way it likes")

    def good(previous, now):
        runs["good"] += 1
        return "ok"

    conn = sqlite3.connect(services.store.location, isolation_level=None)  # below the store: a trigger
    conn.execute("CREATE TRIGGER no_claims BEFORE INSERT ON periodic_claims WHEN NEW.name = 'locked'"
                 " BEGIN SELECT RAISE(ABORT, 'no'); END")
    jobs = [PeriodicJob("locked", 0.05, good), PeriodicJob("broken", 0.05, broken),
            PeriodicJob("good", 0.05, good)]
    scheduler = PeriodicScheduler(services.store, jobs, tick_s=0.05)
    scheduler.start()
    try:
        wait_for(lambda: runs["good"] >= 3 and runs["broken"] >= 3, 60,
                 what="the good job to run again and again, the broken one to be tried again")
    finally:
        # A run is recorded only when it finished; a failed one lets its claim go.
        scheduler.stop()
    assert set(services.store.runtime.periodic_runs()) == {"good"}  # neither the failed nor the unclaimed
    conn.execute("DROP TRIGGER no_claims")
    scheduler = PeriodicScheduler(services.store, jobs, tick_s=0.05)
    scheduler.start()
    try:
        wait_for(lambda: conn.execute("SELECT 1 FROM periodic_runs WHERE name = 'locked'").fetchone(),
                 60, what="the job that could not be claimed to run once it can")
    finally:
        scheduler.stop()
        conn.close()


def test_a_long_periodic_job_keeps_its_claim_by_renewing_it(services):
    started, finish = threading.Event(), threading.Event()

    def slow(previous, now):
        started.set()
        finish.wait(30)
        return "done"

    scheduler = PeriodicScheduler(services.store, [PeriodicJob("slow", 3600, slow)], tick_s=0.05, lease_s=0.6)
    scheduler.start()
    try:
        assert started.wait(30)
        time.sleep(1.5)  # more than two leases: only renewals keep the claim
        with services.store.write() as tx:  # another host's scheduler (its pid is not checked)
            assert tx.runtime.claim_periodic_run("slow", 3600, time.time(), "other", 1, "another-host",
                                                 0.6) == (False, None)
    finally:
        finish.set()
        scheduler.stop()
    assert set(services.store.runtime.periodic_runs()) == {"slow"}


# -- real worker processes ----------------------------------------------------------------------


def worker_config(tmp_path, fake_api, **sections):
    embedding = {"provider": "openai", "base_url": fake_api.base_url, "model": "fake-embed",
                 "dimensions": DIM, "api_key": "sk-test", "max_retries": 0, "timeout_s": 60}
    queue = {"retry_base_s": 0.2, "retry_max_s": 1.0, "reconcile_interval_s": 1.0, "lease_s": 120}
    storage = {"data_dir": "data", "busy_timeout_ms": 200}
    return write_config(tmp_path, embedding=embedding, queue={**queue, **sections.pop("queue", {})},
                        storage={**storage, **sections.pop("storage", {})}, **sections)


@contextmanager
def opened(config):
    """The parts of a front on a config: its store, queue and memory service."""
    services = open_services(load_config(config))
    try:
        yield services
    finally:
        services.close()


def statuses(config, stage=None) -> list[tuple]:
    where = f"WHERE stage = '{stage}'" if stage else ""
    return db_rows(config, f"SELECT stage, status, attempts FROM memory_stages {where} ORDER BY stage")


def wait_for_worker(config, proc):
    wait_for(lambda: db_rows(config, "SELECT 1 FROM workers WHERE pid = ?", (proc.pid,)), 30,
             what="the worker's heartbeat")


@pytest.mark.slow
def test_worker_gives_leases_back_after_a_long_lock_before_they_expire(tmp_path, fake_api):
    config = worker_config(tmp_path, fake_api)
    fake_api.delay_s = 1.0
    worker = start_worker(config)
    try:
        wait_for_worker(config, worker)
        with opened(config) as services:
            services.memories.memorize("finished after the lock", MemoryFields())
            wait_for(lambda: statuses(config, "embed") == [("embed", "running", 1)], 30,
                     interval=0.02, what="the embed stage running")
            with write_lock(services.live.at_start.storage.db_path):
                # Past busy_timeout and every retry of the completion: the worker turns to
                # giving the lease back, and keeps trying while the lock holds.
                wait_for(lambda: "cannot release 1 embed stage(s)" in (tmp_path / "worker-test.log").read_text(),
                         60, what="the worker giving up the completion")
                time.sleep(1.0)  # the behaviour: a second of refused tries to give the lease back
            # Well before the lease would expire (lease_s 120 s): given back, not taken back.
            wait_for(lambda: {s for _, s, _ in statuses(config)} == {"done"}, 60,
                     what="every stage done after the lock (lease_s is 120 s)")
        assert statuses(config, "embed") == [("embed", "done", 2)]  # released, then run again
        assert worker.poll() is None
    finally:
        stop(worker)


@pytest.mark.slow
def test_worker_killed_on_every_attempt_ends_failed(tmp_path, fake_api):
    config = worker_config(tmp_path, fake_api, queue={"max_retries": 2})
    fake_api.delay_s = 10.0  # every attempt is still running when its worker is killed
    worker = start_worker(config)
    try:
        with opened(config) as services:
            memory_id = services.memories.memorize("this kills its worker", MemoryFields()).id
            for attempt in (1, 2):
                wait_for(lambda attempt=attempt: statuses(config, "embed") == [("embed", "running", attempt)], 30,
                         what=f"attempt {attempt} running")
                worker.send_signal(signal.SIGKILL)
                worker.wait()
                # A front starting now reconciles: the dead worker's lease is taken back.
                report = reconcile(services.store, services.enqueuer, services.live.now.worker.heartbeat_timeout_s,
                          queue=services.live.now.queue)
                assert report.failed == (1 if attempt == 2 else 0)
                if attempt == 1:
                    worker = start_worker(config)
            row = db_rows(config, "SELECT status, attempts, last_error FROM memory_stages"
                                  " WHERE memory_id = ? AND stage = 'embed'", (memory_id,))
            assert row == [("failed", 2, "lease expired 2 times (worker killed or stuck)")]
            figures = services.store.stages.queue_figures(time.time())
            assert figures["failed"] >= 1 and figures["running"] == 0
    finally:
        stop(worker)


@pytest.mark.slow
def test_worker_heartbeat_outlives_a_raw_error_and_keeps_its_leases(tmp_path, fake_api):
    # A busy timeout a loaded machine can meet: the test's own reconciles must not fail on a lock.
    config = worker_config(tmp_path, fake_api, worker={"heartbeat_interval_s": 0.3},
                           storage={"busy_timeout_ms": 5000})
    worker = start_worker(config)
    try:
        wait_for_worker(config, worker)
        with opened(config) as services:
            store_sql(services.store,
                      "CREATE TRIGGER no_beats BEFORE UPDATE ON workers BEGIN SELECT RAISE(ABORT, 'no'); END")
            log = config.parent / "worker-test.log"
            wait_for(lambda: "heartbeat failed" in log.read_text(errors="replace"), 30, 0.05,
                     what="a beat failing with a raw sqlite3 error inside the worker")
            store_sql(services.store, "DROP TRIGGER no_beats")
            dropped = time.time()
            wait_for(lambda: db_rows(config, "SELECT heartbeat_time FROM workers")[0][0] > dropped, 10,
                     what="the worker's heartbeat to resume")
            fake_api.delay_s = 4.0  # a job longer than the heartbeat timeout (2 s)
            services.memories.memorize("a slow job of a live worker", MemoryFields())
            wait_for(lambda: ("embed", "running", 1) in statuses(config), 30, what="the embed stage running")
            for _ in range(4):  # fronts and other workers reconcile meanwhile: nothing to take
                time.sleep(0.8)
                assert reconcile(services.store, services.enqueuer, services.live.now.worker.heartbeat_timeout_s,
                          queue=services.live.now.queue).reclaimed == 0
            wait_for(lambda: {s for _, s, _ in statuses(config)} == {"done"}, 30, what="every stage done")
        assert statuses(config, "embed") == [("embed", "done", 1)]
    finally:
        assert stop(worker) == 0
