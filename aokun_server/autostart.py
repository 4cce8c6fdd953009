"""Start a worker when a stdio front finds none alive: one for all fronts on a data_dir.

Fronts serialise on an OS file lock in data_dir; the one that finds no live heartbeat starts
`aokun-worker` detached (it outlives the front) and keeps the lock until the worker's first
heartbeat, so a front starting at the same moment sees that worker instead of starting another.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from contextlib import contextmanager

from shared.config import CONFIG_ENV, AppConfig
from shared.store import runtime
from shared.store.db import Database

log = logging.getLogger("aokun.front")

START_TIMEOUT_S = 30.0


def worker_alive(db: Database, timeout_s: float) -> bool:
    return bool(runtime.live_workers(db.connection(), time.time() - timeout_s))


@contextmanager
def _data_dir_lock(config: AppConfig):
    path = config.storage.data_dir / "autostart.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no flock; a rare double start is harmless
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_worker(config: AppConfig, db: Database) -> str:
    """'running' if a worker is alive, else start one: 'started', or 'failed' (logged)."""
    timeout = config.worker.heartbeat_timeout_s
    with _data_dir_lock(config):
        if worker_alive(db, timeout):
            return "running"
        process = _spawn(config)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if worker_alive(db, timeout):
                log.info("started aokun-worker (pid %s)", process.pid)
                return "started"
            if process.poll() is not None:
                break
            time.sleep(0.1)
    log.error("aokun-worker did not come up; see %s", config.storage.data_dir / "worker.log")
    return "failed"


def _spawn(config: AppConfig) -> subprocess.Popen:
    env = dict(os.environ)
    if config.source is not None:
        env[CONFIG_ENV] = str(config.source)
    log_file = open(config.storage.data_dir / "worker.log", "ab")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "aokun_worker.main"], cwd=os.getcwd(), env=env,
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, start_new_session=True)
    finally:
        log_file.close()
