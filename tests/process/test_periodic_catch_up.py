"""A periodic job is recorded as run only when it finished: a real worker
killed with SIGKILL inside the daily backup leaves a claim and no recorded run, and the next
worker takes the claim over at its start and completes the backup."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import db_rows, start_worker, stop, wait_for, write_config
from shared.config import load_config
from shared.store import open_store

BALLAST_MB = 300  # a backup of this store takes long enough to be killed inside it


@pytest.fixture
def fake_api():
    with FakeEmbeddingsServer(dim=16) as server:
        yield server


def seeded_config(tmp_path, fake_api):
    config = write_config(
        tmp_path,
        embedding={"provider": "openai", "base_url": fake_api.base_url, "model": "fake-embed",
                   "dimensions": 16, "api_key": "sk-test", "max_retries": 0, "timeout_s": 60},
        storage={"data_dir": "data"}, backup={"daily": True})
    loaded = load_config(config)
    open_store(loaded.storage).close()  # the schema, as a worker would create it
    conn = sqlite3.connect(loaded.storage.db_path)
    # No memories (so no upgrade backup at start): only a big table that every backup copies.
    conn.execute("CREATE TABLE ballast (x BLOB)")
    conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
                 " INSERT INTO ballast SELECT randomblob(1048576) FROM n", (BALLAST_MB,))
    conn.commit()
    conn.close()
    return config, loaded.backup_dir


def daily(backups, suffix: str) -> list:
    return sorted(backups.glob(f"*-daily*{suffix}")) if backups.exists() else []


@pytest.mark.slow
def test_a_worker_killed_inside_the_daily_backup_completes_it_after_a_restart(tmp_path, fake_api):
    config, backups = seeded_config(tmp_path, fake_api)
    worker = start_worker(config)
    try:
        wait_for(lambda: daily(backups, ".db.partial"), 60, interval=0.005,
                 what="the daily backup being written")
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        # Killed mid-way: not recorded as run, its claim left behind by a dead process.
        assert db_rows(config, "SELECT last_run_time FROM periodic_runs WHERE name = 'backup'") == []
        assert db_rows(config, "SELECT owner FROM periodic_claims WHERE name = 'backup'") != []
        assert daily(backups, ".db") == []
        killed_at = time.time()

        worker = start_worker(config)
        wait_for(lambda: db_rows(config, "SELECT last_run_time FROM periodic_runs WHERE name = 'backup'"),
                 120, interval=0.2, what="the interrupted daily backup to run again and finish")
        finished = daily(backups, ".db")
        assert len(finished) == 1, finished
        check = sqlite3.connect(f"file:{finished[0]}?mode=ro", uri=True)
        try:
            assert check.execute("SELECT COUNT(*) FROM ballast").fetchone()[0] == BALLAST_MB
        finally:
            check.close()
        assert db_rows(config, "SELECT 1 FROM periodic_claims WHERE name = 'backup'") == []
        [(last_run,)] = db_rows(config, "SELECT last_run_time FROM periodic_runs WHERE name = 'backup'")
        assert last_run >= killed_at  # the last run is the one that finished
        assert worker.poll() is None
    finally:
        if worker.poll() is None:
            stop(worker)


CLAIM_AND_HANG = """
import os, socket, sys, time
from shared.config import load_config
from shared.store import open_store
store = open_store(load_config(sys.argv[1]).storage)
with store.write() as tx:
    assert tx.runtime.claim_periodic_run(sys.argv[2], 60.0, time.time(), "doomed-worker",
                                         os.getpid(), socket.gethostname(), 6 * 3600.0)[0]
print("claimed", flush=True)
time.sleep(600)  # killed here, in the middle of its run
"""


@pytest.mark.parametrize("job", ["reconcile", "housekeeping", "decay", "archive", "atoms", "backup"])
def test_every_periodic_job_cut_off_by_a_kill_runs_again_at_the_next_start(tmp_path, fake_api, job):
    """A process that claimed the job is killed mid-run (SIGKILL); the next worker's start takes
    the claim over and completes the job, whichever it is."""
    config = write_config(
        tmp_path, embedding={"provider": "openai", "base_url": fake_api.base_url, "model": "fake-embed",
                             "dimensions": 16, "api_key": "sk-test", "max_retries": 0},
        storage={"data_dir": "data"}, backup={"daily": True})
    open_store(load_config(config).storage).close()
    claimer = subprocess.Popen([sys.executable, "-c", CLAIM_AND_HANG, str(config), job],
                               stdout=subprocess.PIPE, text=True)
    assert claimer.stdout.readline().strip() == "claimed"
    claimer.send_signal(signal.SIGKILL)
    claimer.wait()
    assert db_rows(config, "SELECT owner FROM periodic_claims WHERE name = ?", (job,)) == [("doomed-worker",)]
    assert db_rows(config, "SELECT 1 FROM periodic_runs WHERE name = ?", (job,)) == []
    restarted = time.time()
    worker = start_worker(config)
    try:
        wait_for(lambda: db_rows(config, "SELECT last_run_time FROM periodic_runs WHERE name = ?", (job,)),
                 60, interval=0.2, what=f"the interrupted {job} job to run again and finish")
        [(last_run,)] = db_rows(config, "SELECT last_run_time FROM periodic_runs WHERE name = ?", (job,))
        assert last_run >= restarted - 1
        assert "doomed-worker" not in {owner for (owner,) in db_rows(config, "SELECT owner FROM periodic_claims")}
    finally:
        stop(worker)
