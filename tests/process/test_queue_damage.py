"""A damaged queue file is moved aside with one warning line, a fresh queue takes its place, and
the work it held is re-queued from the stage rows: fronts, workers and admin commands go on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp.client.stdio import stdio_client

from fake_openai import FakeEmbeddingsServer
from helpers import BIN, all_processed, mcp_session, start_worker, stdio_params, stop, wait_for, write_config
from shared.config import load_config
from shared.errors import StorageError
from shared.queue import open_queue, queue_file_problem
from shared.store.model.stages import StageKey
from shared.tasks import Enqueuer

DAMAGED = "was damaged"


def damage(queue: Path, how: str) -> None:
    """Truncate the file to half its size, or overwrite its first 100 bytes with garbage."""
    with open(queue, "r+b") as handle:
        if how == "half":
            handle.truncate(queue.stat().st_size // 2)
        else:
            handle.write(b"\x17" * 100)


def moved_aside(data: Path) -> list[Path]:
    return sorted(p for p in data.glob("queue.db.damaged-*") if not p.name.endswith(("-wal", "-shm")))


def checkpoint(holder: Enqueuer) -> None:
    """Empty the WAL from one holder's connection: the others' page caches are then stale, and
    their next transaction reads page 1 from the file (as after any checkpoint in a long run)."""
    holder.huey.storage.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def memorize_with_log(config: Path, log: Path, contents: list[str]) -> None:
    """Run a real stdio front with its stderr in `log` and memorize each text through it."""
    with open(log, "a") as errlog, mcp_session(stdio_client(stdio_params(config), errlog=errlog)) as s:
        for content in contents:
            assert s.ok("memorize", {"content": content})["status"] == "accepted"


@pytest.fixture
def fake_api():
    with FakeEmbeddingsServer(dim=16) as server:
        yield server


@pytest.mark.slow
def test_front_and_worker_start_on_a_damaged_queue_and_finish_all_work(tmp_path, fake_api):
    # Vectors from a fake embeddings API: the worker loads no model for four memories.
    config = write_config(tmp_path, embedding={"provider": "openai", "base_url": fake_api.base_url,
                                               "model": "fake", "dimensions": fake_api.dim})
    storage = load_config(config).storage
    data, queue = storage.data_dir, storage.queue_path
    # Three memories whose stages wait in the queue: no worker runs yet.
    memorize_with_log(config, tmp_path / "front-1.log", [f"note {i}: the red bicycle" for i in range(3)])
    damage(queue, "half")
    assert "is damaged" in queue_file_problem(storage)

    memorize_with_log(config, tmp_path / "front-2.log", ["after the damage: the bicycle is blue"])
    front_log = (tmp_path / "front-2.log").read_text()
    assert front_log.count(DAMAGED) == 1 and "Traceback" not in front_log, front_log
    assert f"moved aside to {moved_aside(data)[0]}" in front_log
    assert queue_file_problem(storage) is None

    damage(queue, "header")  # and again, now for the worker to find
    worker = start_worker(config)
    try:
        wait_for(lambda: all_processed(config, 4), timeout=180, what="every stage of all four memories")
    finally:
        assert stop(worker) == 0
    worker_log = (tmp_path / "worker-test.log").read_text()
    assert worker_log.count(DAMAGED) == 1 and "file is not a database" in worker_log, worker_log
    assert "Traceback" not in worker_log
    assert len(moved_aside(data)) == 2


OPENER = """
import sys, time
from pathlib import Path
from shared.config import load_config
from shared.queue import open_queue
from shared.tasks import Enqueuer
storage = load_config(sys.argv[1]).storage
print("ready", flush=True)
while not Path(sys.argv[2]).exists():
    time.sleep(0.001)
print(Enqueuer(open_queue(storage)).pending_count())
"""


def test_processes_opening_a_damaged_queue_together_move_it_aside_once(tmp_path):
    config = write_config(tmp_path)
    storage = load_config(config).storage
    Enqueuer(open_queue(storage)).enqueue([StageKey(1, "embed", "h")])
    damage(storage.queue_path, "header")
    go = tmp_path / "go"
    openers = [subprocess.Popen([sys.executable, "-c", OPENER, str(config), str(go)],
                                cwd=Path(__file__).parents[2], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(4)]
    assert [opener.stdout.readline() for opener in openers] == ["ready\n"] * 4
    go.touch()  # now they all open the queue at once
    results = [opener.communicate(timeout=60) for opener in openers]
    assert all(opener.returncode == 0 for opener in openers), results
    assert [out.strip() for out, _ in results] == ["0"] * 4  # each reads the fresh, empty queue
    assert sum(err.count(DAMAGED) for _, err in results) == 1, results
    assert len(moved_aside(storage.data_dir)) == 1


def test_damage_found_while_running_is_a_storage_error_and_the_queue_goes_on(tmp_path):
    storage = load_config(write_config(tmp_path)).storage
    front, worker = Enqueuer(open_queue(storage)), Enqueuer(open_queue(storage))
    front.enqueue([StageKey(1, "embed", "h")])
    assert worker.pending_count() == 1
    checkpoint(worker)
    damage(storage.queue_path, "header")

    with pytest.raises(StorageError) as raised:
        front.enqueue([StageKey(2, "embed", "h")])
    assert raised.value.kind == "corrupt"
    assert "was damaged (file is not a database); moved aside to" in str(raised.value)
    assert len(moved_aside(storage.data_dir)) == 1
    front.enqueue([StageKey(3, "embed", "h")])  # the fresh queue takes work at once
    # The other holder follows the path to the fresh file instead of the moved-aside one.
    assert worker.pending_count() == 1
    assert worker.huey.dequeue() is not None and worker.pending_count() == 0

    checkpoint(front)
    damage(storage.queue_path, "header")
    assert worker.huey.dequeue() is None  # a consumer's poll: no traceback, the file replaced
    assert len(moved_aside(storage.data_dir)) == 2
    assert front.pending_count() == 0


@pytest.mark.slow
def test_maintenance_reconcile_and_repair_on_a_damaged_queue(tmp_path):
    config = write_config(tmp_path)
    storage = load_config(config).storage
    memorize_with_log(config, tmp_path / "front.log", ["the spare key is under the blue pot"])
    for command, how in ((["maintenance", "reconcile"], "half"), (["repair", "--apply"], "header")):
        damage(storage.queue_path, how)
        run = subprocess.run([BIN / "aokun", *command, "--config", config],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert "Traceback" not in run.stderr and run.stderr.count(DAMAGED) == 1, run.stderr
        assert queue_file_problem(storage) is None
        # The memory's three stages, re-queued from the stage rows into the fresh queue.
        assert Enqueuer(open_queue(storage)).pending_count() >= 1
    assert len(moved_aside(storage.data_dir)) == 2
