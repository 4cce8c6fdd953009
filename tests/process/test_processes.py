"""Processes around a store: the autostarted worker's command line, pid file, status, stop and
idle exit; front heartbeats; doctor's view of a pipeline nobody works on."""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aokun_server.heartbeat import FrontHeartbeat
from fake_openai import FakeEmbeddingsServer
from helpers import all_processed, db_rows, mcp_session, start_worker, stdio_params, stop, wait_for, write_config
from shared import platform
from shared.config import load_config
from shared.pipeline_warnings import format_age, pipeline_warnings
from shared.store import open_store
from shared.worker_pid_files import read_pid_files

BIN = Path(sys.executable).parent
HOST = socket.gethostname()
# worker.idle_exit_s of the idle-exit tests: an idle worker checks three times a second.
IDLE_S = 1.0


def aokun(config, *args) -> subprocess.CompletedProcess:
    return subprocess.run([BIN / "aokun", *map(str, args), "--config", config],
                          capture_output=True, text=True, timeout=120)


def fake_config(tmp_path, api: FakeEmbeddingsServer, **worker):
    return write_config(
        tmp_path,
        embedding={"provider": "openai", "base_url": api.base_url, "model": "fake",
                   "dimensions": api.dim, "api_key": "sk-test", "max_retries": 0},
        queue={"retry_base_s": 0.2, "retry_max_s": 1.0, "max_retries": 1000},
        worker={"heartbeat_interval_s": 0.5, **worker})


def spawn_autostarted(config: Path) -> subprocess.Popen:
    """The worker exactly as a front autostarts it, but our child (so the test can wait on it)."""
    from aokun_server.autostart import worker_command

    log = open(config.parent / "worker-test.log", "ab")
    try:
        return subprocess.Popen(worker_command(load_config(config)), stdout=log, stderr=log)
    finally:
        log.close()


def worker_pids(config: Path) -> list[int]:
    return [row[0] for row in db_rows(config, "SELECT pid FROM workers")]


def kill_leftovers(config: Path) -> None:
    """A detached worker would outlive a failed test: kill every one this store knows of."""
    pids = set(worker_pids(config)) | set(read_pid_files(config.parent / "data"))
    for pid in pids:
        if platform.pid_alive(pid):
            os.kill(pid, 9)


@pytest.fixture
def api():
    with FakeEmbeddingsServer(dim=16) as server:
        yield server


@pytest.mark.slow
def test_autostarted_worker_names_its_store_is_listed_and_stops_gracefully(tmp_path, api):
    config = fake_config(tmp_path, api, autostart=True)
    data_dir = (tmp_path / "data").resolve()
    try:
        with mcp_session(stdio_params(config)) as s:
            s.ok("memorize", {"content": "the autostarted worker embeds this"})
            pids = wait_for(lambda: worker_pids(config), 30, what="an autostarted worker")
            wait_for(lambda: all_processed(config, 1), 30, what="the memory processed")
        assert len(pids) == 1
        pid = pids[0]
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        assert args[args.index("--config") + 1] == str(config.resolve())
        assert args[args.index("--data-dir") + 1] == str(data_dir)
        assert "--autostarted" in args
        assert (data_dir / f"worker-{pid}.pid").read_text().strip() == str(pid)

        # The front is gone; the worker outlives it (idle_exit_s is 600 s by default).
        status = aokun(config, "status")
        assert status.returncode == 0, status.stderr
        assert "workers: 1 alive" in status.stdout
        assert f"pid {pid} on {HOST}, autostarted" in status.stdout
        assert "queue: 0 pending, 0 running, 0 failed, 3 done" in status.stdout

        stopped = aokun(config, "stop", "--timeout", "30")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert f"stopped: worker pid {pid} (autostarted)" in stopped.stdout
        assert not platform.pid_alive(pid)
        # A clean exit: it removed its heartbeat row and its pid file, and said so.
        assert worker_pids(config) == []
        assert not (data_dir / f"worker-{pid}.pid").exists()
        assert f"worker {HOST}:{pid}:" in (data_dir / "worker.log").read_text()
        assert "stopped" in (data_dir / "worker.log").read_text().splitlines()[-1]

        again = aokun(config, "stop")
        assert again.returncode == 0 and "no worker of" in again.stdout
        doctor = aokun(config, "doctor")  # all done: no worker needed
        assert doctor.returncode == 0 and "consistent" in doctor.stdout, doctor.stdout
    finally:
        kill_leftovers(config)


@pytest.mark.slow
def test_autostarted_worker_exits_when_no_front_is_left_but_a_manual_one_stays(tmp_path, api):
    config = fake_config(tmp_path, api, idle_exit_s=IDLE_S)
    store = open_store(load_config(config).storage)
    front = FrontHeartbeat(store, 0.5, "stdio")
    front.start()
    auto = spawn_autostarted(config)
    manual = start_worker(config)
    try:
        wait_for(lambda: len(worker_pids(config)) == 2, 30, what="both workers")
        wait_for(lambda: f"(pid {auto.pid}, autostarted) consuming" in (tmp_path / "worker-test.log").read_text(),
                 30, what="the autostarted worker consuming (its idle clock running)")
        assert db_rows(config, "SELECT pid, transport FROM fronts") == [(os.getpid(), "stdio")]
        time.sleep(2 * IDLE_S)  # the behaviour: idle_exit_s passes twice, and a live front keeps the worker
        assert auto.poll() is None
        status = aokun(config, "status")
        assert "fronts: 1 alive" in status.stdout and f"pid {os.getpid()} on {HOST}, stdio" in status.stdout
        assert "workers: 2 alive" in status.stdout and "manual" in status.stdout

        front.stop()
        assert db_rows(config, "SELECT COUNT(*) FROM fronts") == [(0,)]
        assert auto.wait(timeout=60) == 0
        assert "autostarted worker exiting" in (tmp_path / "worker-test.log").read_text()  # idle, not failed
        assert worker_pids(config) == [manual.pid]
        assert not (tmp_path / "data" / f"worker-{auto.pid}.pid").exists()
        time.sleep(2 * IDLE_S)  # the behaviour: idle_exit_s passes again with no front
        assert manual.poll() is None  # workers started by hand never idle-exit
    finally:
        stop(auto)
        assert stop(manual) == 0
        front.stop()
        store.close()


@pytest.mark.slow
def test_autostarted_worker_stays_while_work_is_pending(tmp_path, api):
    config = fake_config(tmp_path, api, idle_exit_s=IDLE_S)
    with mcp_session(stdio_params(config)) as s:
        s.ok("memorize", {"content": "embedding this fails for a while"})
    api.fail_next = 10 ** 6
    auto = spawn_autostarted(config)
    try:
        wait_for(lambda: db_rows(config, "SELECT attempts FROM memory_stages WHERE stage = 'embed'")[0][0] >= 2,
                 30, what="the embed stage retrying")
        time.sleep(2 * IDLE_S)  # the behaviour: twice idle_exit_s with no front, and pending work keeps the worker
        assert auto.poll() is None
        api.fail_next = 0
        wait_for(lambda: all_processed(config, 1), 30, what="the memory processed")
        assert auto.wait(timeout=20) == 0
    finally:
        stop(auto)


@pytest.mark.slow
def test_doctor_fails_on_pending_work_without_worker_and_on_stuck_stages(tmp_path, api):
    config = fake_config(tmp_path, api)
    with mcp_session(stdio_params(config)) as s:
        s.ok("memorize", {"content": "nobody will process this"})
    doctor = aokun(config, "doctor")
    assert doctor.returncode == 1
    assert "PROBLEM: 3 stages pending, no worker has ever run" in doctor.stdout

    conn = sqlite3.connect(tmp_path / "data" / "aokun.db")
    with conn:
        conn.execute("INSERT INTO workers (worker_id, pid, hostname, started_time, heartbeat_time)"
                     " VALUES ('gone', 1, 'elsewhere', ?, ?)", (time.time() - 9000, time.time() - 7200))
        conn.execute("UPDATE memory_stages SET status = 'running', lease_owner = 'gone',"
                     " lease_until = ?, attempts = 1 WHERE stage = 'embed'", (time.time() - 60,))
    conn.close()
    doctor = aokun(config, "doctor")
    assert doctor.returncode == 1
    assert "PROBLEM: 3 stages pending, no worker alive for 2 h" in doctor.stdout
    assert "PROBLEM: 1 stage stuck" in doctor.stdout
    assert "embed stage stuck after 1 attempt(s): lease held by gone expired" in doctor.stdout
    status = aokun(config, "status")
    assert "workers: 0 alive" in status.stdout and "WARNING: 3 stages pending, no worker alive for 2 h" in status.stdout


def test_front_heartbeat_outlives_errors_and_leaves_no_row(tmp_path, caplog):
    config = write_config(tmp_path, worker={"heartbeat_interval_s": 0.1})
    store = open_store(load_config(config).storage)
    beat = FrontHeartbeat(store, 0.1, "http")
    try:
        beat.start()
        rows = store.runtime.front_rows()
        assert [(r.pid, r.hostname, r.kind) for r in rows] == [(os.getpid(), HOST, "http")]
        first = rows[0].heartbeat_time
        other = sqlite3.connect(tmp_path / "data" / "aokun.db", isolation_level=None)
        with caplog.at_level(logging.WARNING, logger="aokun.health"):
            other.execute("ALTER TABLE fronts RENAME TO fronts_away")  # every beat now fails
            wait_for(lambda: "front-heartbeat failed" in caplog.text, 10, what="a beat failing")
            other.execute("ALTER TABLE fronts_away RENAME TO fronts")
        wait_for(lambda: store.runtime.front_rows()[0].heartbeat_time > first + 0.5, 5,
                 what="beats after the errors")
        assert [r.id for r in store.runtime.live_fronts(time.time() - 1)] == [beat.front_id]
        other.close()
    finally:
        beat.stop()
    assert store.runtime.front_rows() == []
    store.close()


def test_a_stopping_worker_is_not_counted_alive(tmp_path):
    config = write_config(tmp_path)
    store = open_store(load_config(config).storage)
    now = time.time()
    with store.write() as tx:
        tx.runtime.beat("me", os.getpid(), HOST, now)
        tx.runtime.mark_autostarted("me")
    rows = store.runtime.worker_rows()
    assert [(r.kind, r.stopping) for r in rows] == [("autostarted", False)]
    assert store.runtime.live_workers(now - 1) == ["me"]
    with store.write() as tx:
        tx.runtime.mark_stopping("me")
        tx.runtime.beat("me", os.getpid(), HOST, now + 1)  # beats go on while it winds down
    assert store.runtime.live_workers(now - 1) == []
    store.close()


def test_pipeline_warnings():
    now = 100_000.0
    quiet = {"pending": 0, "running": 0, "failed": 0, "done": 9, "stuck": 0, "retrying": 0}
    assert pipeline_warnings(quiet, 0, None, now) == []
    pending = {**quiet, "pending": 3}
    assert pipeline_warnings(pending, 1, now - 1, now) == []
    assert pipeline_warnings(pending, 0, None, now)[0].startswith(
        "3 stages pending, no worker has ever run; start aokun-worker")
    assert pipeline_warnings(pending, 0, now - 7200, now)[0].startswith(
        "3 stages pending, no worker alive for 2 h;")
    troubled = {**quiet, "stuck": 1, "retrying": 2, "failed": 4}
    warnings = pipeline_warnings(troubled, 1, now, now)
    assert [w.split(";")[0] for w in warnings] == [
        "1 stage stuck, running past the lease", "2 stages failed and will be retried",
        "4 stages failed for good"]
    # Before the stuck/retrying figures existed, the keys may be missing.
    assert pipeline_warnings({"pending": 0, "running": 0, "failed": 0}, 0, None, now) == []
    assert [format_age(s) for s in (40, 720, 7200, 3 * 86400)] == ["40 s", "12 min", "2 h", "3 days"]
