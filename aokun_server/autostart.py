"""Start a worker when a stdio front finds none alive: one for all fronts on a data_dir.

Fronts serialise on an OS file lock in data_dir; the one that finds no live heartbeat starts
`aokun-worker` detached (it outlives the front) and keeps the lock until the worker's first
heartbeat, so a front starting at the same moment sees that worker instead of starting another.
The worker's command line names its config and data_dir, so `ps` says which store it serves;
`--autostarted` lets it exit once no front has been alive for worker.idle_exit_s.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

from shared import platform
from shared.config import AppConfig
from shared.store.interface import Store

log = logging.getLogger("aokun.front")

START_TIMEOUT_S = 30.0


def worker_alive(store: Store, timeout_s: float) -> bool:
    return bool(store.runtime.live_workers(time.time() - timeout_s))


def ensure_worker(config: AppConfig, store: Store) -> str:
    """'running' if a worker is alive, else start one: 'started', or 'failed' (logged)."""
    timeout = config.worker.heartbeat_timeout_s
    # Windows has no lock here: two fronts starting together may start two workers (harmless).
    with platform.exclusive_file_lock(config.storage.data_dir / "autostart.lock"):
        if worker_alive(store, timeout):
            return "running"
        process = _spawn(config)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if worker_alive(store, timeout):
                log.info("started aokun-worker (pid %s)", process.pid)
                return "started"
            if process.poll() is not None:
                break
            time.sleep(0.1)
    log.error("aokun-worker did not come up; see %s", config.storage.data_dir / "worker.log")
    return "failed"


def worker_command(config: AppConfig) -> list[str]:
    command = [sys.executable, "-m", "aokun_worker.main"]
    if config.source is not None:
        command += ["--config", str(config.source)]
    return command + ["--data-dir", str(config.storage.data_dir), "--autostarted"]


def _spawn(config: AppConfig) -> subprocess.Popen:
    log_file = open(config.storage.data_dir / "worker.log", "ab")
    try:
        return subprocess.Popen(
            worker_command(config), cwd=os.getcwd(), stdin=subprocess.DEVNULL,
            stdout=log_file, stderr=log_file, **platform.detached_popen_kwargs())
    finally:
        log_file.close()
