"""How long until every memory is searchable by meaning (shared/catch_up.py): the figures and
the line, on a real temporary store with stages done at chosen times and a clock of the test's;
then `aokun status` and `aokun status --follow` while the worker's runner empties the queue."""

from __future__ import annotations

import io
import os
import socket
import sys
import threading

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import WorkerHere, aokun_in_process, seed_memories, wait_for, write_config
from shared.catch_up import WINDOW_S, catch_up, pace
from shared.config import StorageConfig
from shared.store import open_store
from shared.store.model.documents import MemoryFields

NOW = 1_800_000_000.0
TIMEOUT = 30.0  # heartbeat_timeout_s


@pytest.fixture
def store(tmp_path):
    opened = open_store(StorageConfig(data_dir=tmp_path / "data"))
    yield opened
    opened.close()


def memorize(store, count: int) -> None:
    """`count` memories stored an hour ago, their stages waiting (one write: the figures are
    the point here, memorize's own path is tested elsewhere)."""
    with store.write() as tx:
        for n in range(count):
            memory_id = tx.documents.insert(f"memory {n}", f"memory {n}", MemoryFields(), NOW - 3600, "")
            tx.stages.create_for_memory(memory_id, tx.documents.get(memory_id).content_hash, NOW - 3600)


def finish(store, count: int, stage: str, at: float) -> None:
    """The `count` oldest waiting rows of `stage` done at `at`, as a worker does them."""
    with store.write() as tx:
        keys = tx.stages.claim_more(stage, "w", at, 60, count)
        assert len(keys) == count and all(tx.stages.complete(k, "w", at) for k in keys)


def worker_alive(store, started: float, now: float = NOW) -> None:
    """A heartbeat row of a worker started at `started`, beating at `now` (this process's pid,
    on this host: alive as long as the test runs)."""
    store.runtime.beat("w1", os.getpid(), socket.gethostname(), started)
    store.runtime.beat("w1", os.getpid(), socket.gethostname(), now)


def test_the_estimate_is_the_waiting_at_the_pace_of_the_last_five_minutes(store):
    memorize(store, 1300)
    finish(store, 60, "embed", NOW - 600)  # before the window: not in the pace
    finish(store, 300, "embed", NOW - 200)  # 300 in the window: 1/s
    finish(store, 6, "atoms", NOW - 100)  # 6 atoms in it: 0.02/s
    worker_alive(store, started=NOW - 3600)
    found = catch_up(store, TIMEOUT, NOW)
    embed, atoms, graph = found.stages
    assert (embed.stage, embed.waiting, embed.done, embed.window_s) == ("embed", 940, 300, WINDOW_S)
    assert embed.per_s == 1.0 and embed.eta_s == 940.0
    assert (atoms.waiting, atoms.done, atoms.per_s, atoms.eta_s) == (1294, 6, 0.02, 1294 / 0.02)
    assert (graph.waiting, graph.done, graph.per_s, graph.eta_s) == (1300, 0, None, None)
    assert found.workers == 1
    assert found.line() == ("searchable by words: all; by meaning: 940 memories wait, about 16 min "
                            "at the pace of the last 5 min (1.0/s)")
    assert found.as_dict()["stages"][0] == {"stage": "embed", "waiting": 940, "done": 300, "window_s": 300.0,
                                            "per_s": 1.0, "eta_s": 940.0}


def test_a_worker_younger_than_the_window_is_paced_over_its_own_time(store):
    memorize(store, 2000)
    finish(store, 100, "embed", NOW - 250)  # by a worker gone since: not the pace of today's
    finish(store, 1234, "embed", NOW - 30)
    worker_alive(store, started=NOW - 60)
    found = catch_up(store, TIMEOUT, NOW)
    assert (found.embed.done, found.embed.window_s, found.embed.waiting) == (1234, 60.0, 666)
    assert found.line() == ("searchable by words: all; by meaning: 666 memories wait, about 32 s "
                            "at the pace of the last 60 s (20.6/s)")
    # Started a moment ago: the window is never shorter than ten seconds.
    store.runtime.remove_worker("w1")
    worker_alive(store, started=NOW - 0.5)
    assert catch_up(store, TIMEOUT, NOW).embed.window_s == 10.0


def test_with_no_worker_alive_there_is_no_estimate(store):
    memorize(store, 1235)
    finish(store, 1, "embed", NOW - 10)
    assert catch_up(store, TIMEOUT, NOW).line() == (
        "searchable by words: all; by meaning: 1,234 memories wait and no worker is running "
        "(start one: aokun run, or aokun-worker)")
    worker_alive(store, started=NOW - 3600, now=NOW - TIMEOUT - 1)  # its heartbeat too old
    assert catch_up(store, TIMEOUT, NOW).workers == 0


def test_a_pace_not_known_yet_and_nothing_waiting(store):
    memorize(store, 2)
    worker_alive(store, started=NOW - 3600)
    finish(store, 1, "embed", NOW - WINDOW_S - 1)
    assert catch_up(store, TIMEOUT, NOW).line() == (
        "searchable by words: all; by meaning: 1 memory waits; the pace is not known yet "
        "(nothing embedded in the last 5 min)")
    finish(store, 1, "embed", NOW - 1)
    found = catch_up(store, TIMEOUT, NOW)
    assert found.line() == "every memory is searchable by words; none waits to be searchable by meaning"
    assert (found.embed.eta_s, found.embed.done) == (0.0, 0)  # nothing waits: no count of the pace
    assert found.estimate() == "none waits"


def test_paces_are_said_per_second_minute_or_hour():
    assert [pace(p) for p in (250.0, 3.44, 1.0, 0.5, 1 / 60, 1 / 3600)] == [
        "250/s", "3.4/s", "1.0/s", "30.0/min", "1.0/min", "1.0/h"]


def test_status_says_it_and_follow_shows_the_bar_until_none_waits(tmp_path):
    with FakeEmbeddingsServer(dim=8) as api:
        config = write_config(tmp_path, embedding={"provider": "openai", "base_url": api.base_url,
                                                   "model": "fake", "dimensions": 8})
        seed_memories(config, "alice", *(f"note {n} about the garden shed" for n in range(5)))
        status = aokun_in_process("status", "--config", config)
        assert status.returncode == 0, status.stderr
        lines = status.stdout.splitlines()
        [queue] = [n for n, line in enumerate(lines) if line.startswith("queue: ")]
        assert lines[queue + 1] == ("searchable by words: all; by meaning: 5 memories wait and no worker is "
                                    "running (start one: aokun run, or aokun-worker)")

        worker = WorkerHere(config)
        errors = []

        def empty_the_queue():
            # Once --follow has drawn its bar (its stderr is this process's while it runs).
            try:
                wait_for(lambda: isinstance(sys.stderr, io.StringIO) and " 0/5 [" in sys.stderr.getvalue(),
                         60, interval=0.02, what="aokun status --follow to draw its bar")
                # What a worker does first: embed every waiting memory (the later stages
                # change nothing --follow shows).
                while worker.service.runner.run_next("embed")[0]:
                    pass
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=empty_the_queue)
        thread.start()
        try:
            followed = aokun_in_process("status", "--follow", "--config", config)
        finally:
            thread.join()
            worker.close()
    assert not errors, errors
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.strip().splitlines()[-1] == (
        "every memory is searchable by words; none waits to be searchable by meaning")
    bar = followed.stderr.replace("\r", "\n").splitlines()
    assert any(line.startswith("searchable by meaning:") and "0/5" in line and "no worker is running" in line
               for line in bar), followed.stderr
    assert any(line.startswith("searchable by meaning: 100%") and "5/5" in line and "none waits" in line
               for line in bar), followed.stderr


def test_an_import_queues_what_it_stored_every_few_seconds_so_a_worker_starts_meanwhile(tmp_path):
    from aokun_admin.commands import Admin
    from aokun_admin.import_end import QUEUE_EVERY_S, QueueAsYouGo
    from shared.config import load_config

    admin = Admin(load_config(write_config(tmp_path)))
    try:
        service = admin.memories(queued=False)  # as an import stores its rows
        clock = [0.0]
        queueing = QueueAsYouGo(admin, clock=lambda: clock[0])
        for n in range(3):
            service.memorize(f"imported memory {n}", MemoryFields())

        def unqueued() -> int:
            return len(admin.store.stages.ready_to_enqueue(NOW * 2, include_enqueued=False))

        clock[0] = QUEUE_EVERY_S / 2
        queueing.tick()
        assert unqueued() == 3 * 3
        clock[0] = QUEUE_EVERY_S
        queueing.tick()
        assert unqueued() == 0
        assert admin.services.huey.pending_count() > 0
    finally:
        admin.close()
