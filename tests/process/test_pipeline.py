"""Front, queue and real worker processes together: processing, crashes, outages, autostart."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import threading
import time

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import (
    all_processed,
    db_rows,
    mcp_session,
    stage_summary,
    start_worker,
    stdio_params,
    stop,
    wait_for,
    write_config,
)
from shared.config import ALL_TOOLS
from shared.store.model.documents import unmarked


def openai_config(tmp_path, server: FakeEmbeddingsServer, **sections):
    embedding = {"provider": "openai", "base_url": server.base_url, "model": "fake-embed",
                 "dimensions": server.dim, "api_key": "sk-test", "max_retries": 1}
    queue = {"retry_base_s": 0.2, "retry_max_s": 1.0, "reconcile_interval_s": 2.0,
             "embed_batch_size": 8}
    return write_config(tmp_path, embedding={**embedding, **sections.pop("embedding", {})},
                        queue={**queue, **sections.pop("queue", {})},
                        server={"exposed_tools": list(ALL_TOOLS)}, **sections)


@pytest.fixture
def fake_api():
    with FakeEmbeddingsServer(dim=64) as server:
        yield server


@pytest.mark.slow
def test_default_embedder_finds_memories_by_meaning(tmp_path):
    config = write_config(tmp_path, server={"exposed_tools": list(ALL_TOOLS)})
    worker = start_worker(config)
    try:
        with mcp_session(stdio_params(config)) as s:
            cat = s.ok("memorize", {"content": "I adopted a small grey cat named Mochi last spring"})["id"]
            s.ok("memorize", {"content": "My sister lives in Lisbon and works as an architect"})
            s.ok("memorize", {"content": "下周三下午要和同事开项目评审会"})
            wait_for(lambda: all_processed(config, 3), 120, what="three memories embedded")
            stats = s.ok("memory_stats")
            assert stats["vectors"]["model"] == "local:multilingual-e5-small-q4"
            assert (stats["vectors"]["documents"], stats["vectors"]["dim"], stats["vectors"]["behind"]) == (3, 384, 0)
            assert stats["queue"]["pending"] == stats["queue"]["running"] == 0
            assert stats["workers"]["live"] == 1
            # No word in common with the memory: only the vector channel can find it.
            assert s.ok("recall", {"query": "kitten", "k": 1})["results"][0]["id"] == cat
    finally:
        assert stop(worker) == 0


@pytest.mark.slow
def test_worker_killed_at_random_moments_loses_nothing(tmp_path, fake_api):
    config = openai_config(tmp_path, fake_api)
    fake_api.delay_s = 0.05  # so that kills land in the middle of embedding batches too
    rng = random.Random(7)
    worker = start_worker(config)
    done = threading.Event()

    def memorize_200():
        with mcp_session(stdio_params(config)) as s:
            for i in range(200):
                s.ok("memorize", {"content": f"memory {i}: note about topic {i % 13} and item {i}"})
        done.set()

    writer = threading.Thread(target=memorize_200)
    writer.start()
    kills = 0
    try:
        while not done.is_set() or kills < 5:
            time.sleep(rng.uniform(0.2, 1.2))
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            kills += 1
            worker = start_worker(config)
        writer.join()
        wait_for(lambda: all_processed(config, 200), 120, what="all 200 memories processed")
    finally:
        stop(worker)
        writer.join(timeout=60)
    assert kills >= 5
    assert stage_summary(config) == {"done": 600}
    per_memory = db_rows(config, "SELECT memory_id, COUNT(*) FROM vectors WHERE kind = 'document' GROUP BY memory_id")
    assert len(per_memory) == 200 and {count for _, count in per_memory} == {1}
    # And exactly one vector per graph entry, none orphaned.
    assert db_rows(config, "SELECT COUNT(*) FROM graph_entries") == db_rows(
        config, "SELECT COUNT(*) FROM vectors v JOIN graph_entries e ON e.id = v.owner_id WHERE v.kind = 'graph_entry'")
    assert db_rows(config, "SELECT COUNT(*) FROM vectors WHERE kind = 'graph_entry'") == db_rows(
        config, "SELECT COUNT(*) FROM graph_entries")


def _server_pids(config) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
                if any(part.endswith(b"aokun-server") for part in cmdline) and str(config).encode() in cmdline:
                    pids.append(int(entry))
    return pids


@pytest.mark.slow
def test_front_killed_right_after_memorize_replies(tmp_path, fake_api):
    config = openai_config(tmp_path, fake_api)
    with contextlib.suppress(Exception):
        with mcp_session(stdio_params(config)) as s:
            mid = s.ok("memorize", {"content": "the boiler service is due in March"})["id"]
            for pid in _server_pids(config):
                os.kill(pid, signal.SIGKILL)
    (text,), = db_rows(config, "SELECT text FROM documents WHERE id = ?", (mid,))
    assert unmarked(text) == "the boiler service is due in March"
    worker = start_worker(config)
    try:
        wait_for(lambda: all_processed(config, 1), 60, what="the memory processed after the crash")
    finally:
        stop(worker)


@pytest.mark.slow
def test_two_workers_run_each_stage_once(tmp_path, fake_api):
    config = openai_config(tmp_path, fake_api, queue={"embed_batch_size": 4})
    workers = [start_worker(config), start_worker(config)]
    try:
        wait_for(lambda: len(db_rows(config, "SELECT 1 FROM workers")) == 2, 30, what="two workers")
        with mcp_session(stdio_params(config)) as s:
            for i in range(80):
                s.ok("memorize", {"content": f"shared work item {i}"})
        wait_for(lambda: all_processed(config, 80), 60, what="80 memories processed")
    finally:
        for w in workers:
            stop(w)
    assert db_rows(config, "SELECT DISTINCT attempts FROM memory_stages") == [(1,)]
    embedded = [t for t in fake_api.texts if unmarked(t).startswith("shared work item")]
    assert len(embedded) == len(set(embedded)) == 80


@pytest.mark.slow
def test_periodic_job_that_fell_due_runs_at_start_and_lost_messages_are_requeued(tmp_path, fake_api):
    config = openai_config(tmp_path, fake_api)
    from shared.assembly import open_services
    from shared.config import load_config
    from shared.store.model.documents import MemoryFields

    services = open_services(load_config(config), queued=False)
    # A memory whose message never reached the queue (as if its front died before queueing).
    services.memories.memorize("orphan memory without a message", MemoryFields())
    long_ago = time.time() - 3 * 86400
    with services.store.write() as tx:  # housekeeping last ran three days ago
        assert tx.runtime.claim_periodic_run("housekeeping", 3600.0, long_ago, "earlier", os.getpid(),
                                             socket.gethostname(), 60.0) == (True, None)
        tx.runtime.finish_periodic_run("housekeeping", "earlier", long_ago)
    services.close()
    started = time.time()
    worker = start_worker(config)
    try:
        wait_for(lambda: db_rows(config, "SELECT last_run_time FROM periodic_runs WHERE name = 'housekeeping'")[0][0]
                 >= started,
                 30, what="the overdue housekeeping run")
        wait_for(lambda: all_processed(config, 1), 30, what="the orphan memory processed")
    finally:
        stop(worker)


@pytest.mark.slow
def test_embedder_outage_then_recovery_back_fills(tmp_path, fake_api):
    config = openai_config(tmp_path, fake_api)
    fake_api.fail_next = 10**6  # down
    worker = start_worker(config)
    try:
        with mcp_session(stdio_params(config)) as s:
            ids = [s.ok("memorize", {"content": f"outage note {i} about the garden shed"})["id"] for i in range(5)]
            wait_for(lambda: db_rows(config, "SELECT MAX(attempts) FROM memory_stages WHERE stage = 'embed'")[0][0]
                     >= 2,
                     30, what="embed retries")
            stats = s.ok("memory_stats")
            assert stats["vectors"]["behind"] == 5 and stats["documents"]["total"] == 5
            # Recall keeps serving from BM25 while the embedder is down.
            assert {r["id"] for r in s.ok("recall", {"query": "garden shed", "k": 10})["results"]} == set(ids)
            fake_api.fail_next = 0  # back
            wait_for(lambda: all_processed(config, 5), 60, what="vectors back-filled")
            assert s.ok("memory_stats")["vectors"]["behind"] == 0
    finally:
        stop(worker)


def test_wrong_dimension_is_a_clear_error_and_writes_nothing(tmp_path, fake_api):
    """The embed stage, run by the worker's own runner in this process, on every try it gets."""
    from aokun_server.app import build_front
    from aokun_worker.service import WorkerService
    from shared.assembly import open_services
    from shared.config import load_config

    config = openai_config(tmp_path, fake_api, queue={"max_retries": 2, "retry_base_s": 0.01,
                                                      "retry_max_s": 0.01})
    fake_api.answer_dim = 32
    front = build_front(load_config(config))
    worker = WorkerService(open_services(load_config(config), queued=False))
    try:
        with mcp_session(front.server) as s:
            s.ok("memorize", {"content": "a memory the API cannot embed properly"})

            def failed() -> bool:
                worker.runner.run_next("embed")  # the next try, once its back-off is over
                # the embed stage, and the graph stage that waits for its vectors
                return s.ok("memory_stats")["queue"]["failed"] == 2
            wait_for(failed, 30, 0.02, what="the embed stage failed")
        error = db_rows(config, "SELECT last_error FROM memory_stages WHERE stage = 'embed'")[0][0]
        assert "32-dimensional" in error and "embedding.dimensions" in error
        assert db_rows(config, "SELECT attempts FROM memory_stages WHERE stage = 'embed'") == [(2,)]
        assert db_rows(config, "SELECT COUNT(*) FROM vectors") == [(0,)]
    finally:
        worker.services.close()
        front.close()


@pytest.mark.slow
def test_two_fronts_starting_at_once_autostart_exactly_one_worker(tmp_path, fake_api):
    config = openai_config(tmp_path, fake_api, worker={"autostart": True})
    results, errors = [], []

    def front():
        try:
            with mcp_session(stdio_params(config)) as s:
                results.append(s.ok("memorize", {"content": "autostart check"})["id"])
                wait_for(lambda: db_rows(config, "SELECT COUNT(*) FROM workers")[0][0] >= 1, 30, what="a worker")
                # Both fronts stay up a while: a second worker, wrongly autostarted, would have
                # its heartbeat row by then (time passing is what is checked: nothing to wait on).
                time.sleep(1.5)
        except BaseException as exc:  # reported by the main thread below
            errors.append(repr(exc))

    threads = [threading.Thread(target=front) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pids = [row[0] for row in db_rows(config, "SELECT pid FROM workers")]
    try:
        assert errors == [] and len(results) == 2
        assert len(pids) == 1
        wait_for(lambda: all_processed(config, 2), 30, what="both memories processed by it")
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
        wait_for(lambda: db_rows(config, "SELECT COUNT(*) FROM workers")[0][0] == 0, 20, what="worker exit")


@pytest.mark.slow
def test_sigterm_lets_the_running_job_finish(tmp_path, fake_api):
    config = openai_config(tmp_path, fake_api)
    fake_api.delay_s = 1.0  # long enough to be signalled while it runs (waited for below)
    worker = start_worker(config)
    try:
        with mcp_session(stdio_params(config)) as s:
            wait_for(lambda: db_rows(config, "SELECT COUNT(*) FROM workers")[0][0] == 1, 30, what="worker")
            s.ok("memorize", {"content": "slow to embed"})
            wait_for(lambda: db_rows(config, "SELECT status FROM memory_stages WHERE stage = 'embed'")
                     == [("running",)],
                     30, what="the embed job running")
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0
    finally:
        stop(worker)
    assert db_rows(config, "SELECT status FROM memory_stages WHERE stage = 'embed'") == [("done",)]
    assert db_rows(config, "SELECT COUNT(*) FROM vectors WHERE kind = 'document'") == [(1,)]
