"""`aokun status` tells a store whose workers stopped (and when) from one where no worker ever
ran, and both from a worker killed without a goodbye: real workers, stopped with SIGTERM and
SIGKILL, and the real `aokun status`."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

from fake_openai import FakeEmbeddingsServer
from helpers import BIN, db_rows, seed_memories, start_worker, stop, wait_for, write_config


def status(config: Path) -> str:
    done = subprocess.run([str(BIN / "aokun"), "status", "--config", str(config)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def workers_line(text: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith("workers: ")]
    return line


def beating(config: Path, worker: subprocess.Popen) -> bool:
    return db_rows(config, "SELECT COUNT(*) FROM workers WHERE pid = ?", (worker.pid,)) == [(1,)]


def test_status_tells_a_stopped_worker_from_none_ever_and_from_a_killed_one(tmp_path):
    with FakeEmbeddingsServer(dim=16) as api:
        config = write_config(
            tmp_path, embedding={"provider": "openai", "base_url": api.base_url, "model": "fake",
                                 "dimensions": 16, "api_key": "sk-test"},
            worker={"heartbeat_interval_s": 0.5})
        seed_memories(config, "me", "a memory queued while no worker runs")
        never = status(config)
        assert workers_line(never) == "workers: 0 alive; no worker has ever run on this store"
        assert "no worker has ever run; start aokun-worker" in never  # the pending stages' warning

        worker = start_worker(config)
        try:
            wait_for(lambda: beating(config, worker), 60, what="the worker's heartbeat")
            assert workers_line(status(config)) == "workers: 1 alive"
        finally:
            assert stop(worker) == 0
        stopped = status(config)
        assert re.fullmatch(r"workers: 0 alive; the last one stopped \d+ s ago, at "
                            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", workers_line(stopped)), stopped
        assert "never" not in stopped

        killed = start_worker(config)
        try:
            wait_for(lambda: beating(config, killed), 60, what="the second worker's heartbeat")
        finally:
            killed.send_signal(signal.SIGKILL)
            killed.wait()
        seed_memories(config, "me", "a memory written after the worker was killed")
        quiet = status(config)
        assert re.fullmatch(rf"workers: 0 alive; the last one \(pid {killed.pid} on .+, manual\) last beat "
                            r"\d+ s ago, at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", workers_line(quiet)), quiet
        assert re.search(r"WARNING: \d+ stages? pending, no worker alive for \d+ s", quiet), quiet
