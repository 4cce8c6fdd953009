"""Is the pipeline alive? Warnings over the queue figures, the front's heartbeat, the
autostarted worker's idle exit and the workers' pid files."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from shared import platform
from shared.logs import log_failure
from shared.store.interface import Session, Store
from shared.store.model.runtime import ProcessRow
from shared.units import DAY, HOUR

log = logging.getLogger("aokun.health")


# -- warnings ------------------------------------------------------------------------------

def pipeline_warnings(queue: dict, live_workers: int, newest_heartbeat: float | None,
                      now: float) -> list[str]:
    """One line per reason the stage rows will not reach 'done' by themselves, or have not.

    `queue` is store.stages.queue_figures(); `newest_heartbeat` the newest heartbeat of any worker
    (None if no worker ever beat on this store)."""
    warnings = []
    waiting = queue.get("pending", 0) + queue.get("running", 0)
    if waiting and not live_workers:
        if newest_heartbeat is None:
            since = "no worker has ever run"
        else:
            since = f"no worker alive for {format_age(now - newest_heartbeat)}"
        warnings.append(f"{_count(waiting, 'stage')} pending, {since}; start aokun-worker "
                        "(or a stdio front with worker.autostart)")
    for figure, what in _TROUBLE:
        if queue.get(figure, 0):
            warnings.append(f"{_count(queue[figure], 'stage')} {what}")
    return warnings


# Stage figures that mean trouble, and what to say about them.
_TROUBLE = (
    ("stuck", "stuck, running past the lease; a live worker takes them back, or run "
              "`aokun maintenance reconcile`"),
    ("retrying", "failed and will be retried; the worker log says why"),
    ("failed", "failed for good; `aokun repair --apply` retries them"),
)


def format_age(seconds: float) -> str:
    """A duration as a person would say it: 40 s, 12 min, 2 h, 3 days."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * HOUR:
        return f"{seconds / HOUR:.0f} h"
    return f"{seconds / DAY:.0f} days"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# -- the front's heartbeat -----------------------------------------------------------------

class Repeater:
    """A daemon thread that calls `tick` every `interval` seconds until stop() or until tick
    returns True. An exception is logged and the next tick comes anyway: a dead heartbeat
    thread would make a live process look dead."""

    def __init__(self, name: str, interval: float, tick: Callable[[], bool]):
        self.interval = interval
        self.tick = tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self.tick():
                    return
            except Exception:
                log_failure(log, "%s failed; will try again in %.1f s", self._thread.name, self.interval)


class FrontHeartbeat:
    """A front's row in `fronts`, fresh every `interval` seconds from start() until stop().

    Start it before looking for a worker: an autostarted worker that decides to exit does so
    in one transaction with its check that no front is alive."""

    def __init__(self, store: Store, interval: float, transport: str, endpoint: str | None = None):
        self.store = store
        self.transport = transport
        self.endpoint = endpoint  # where an HTTP front listens, as bound (not as configured)
        self.front_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._repeater = Repeater("front-heartbeat", interval, self.beat)

    def beat(self) -> bool:
        with self.store.write() as tx:
            tx.runtime.front_beat(self.front_id, os.getpid(), socket.gethostname(), self.transport,
                                  time.time(), self.endpoint)
        return False

    def start(self) -> None:
        try:
            self.beat()
        except Exception:  # the front serves anyway; the thread keeps trying
            log_failure(log, "front heartbeat failed; will try again in %.1f s", self._repeater.interval)
        self._repeater.start()

    def stop(self) -> None:
        self._repeater.stop()
        try:
            with self.store.write() as tx:
                tx.runtime.remove_front(self.front_id)
        except Exception:  # the row ages out; workers judge fronts by heartbeat age and pid
            log_failure(log, "could not remove front heartbeat row %s", self.front_id)


# -- the autostarted worker's idle exit ----------------------------------------------------

class IdleExit:
    """For a worker a front started: once no front has been alive for `idle_s` seconds and no
    stage is pending or running, mark this worker as stopping and call `on_idle` (once)."""

    def __init__(self, store: Store, worker_id: str, idle_s: float, alive_s: float,
                 on_idle: Callable[[], None]):
        self.store = store
        self.worker_id = worker_id
        self.idle_s = idle_s
        self.alive_s = alive_s
        self.on_idle = on_idle
        self.last_front_seen = time.time()
        self._repeater = Repeater("idle-exit", max(0.2, min(alive_s, idle_s) / 3), self.check)

    def start(self) -> None:
        self._repeater.start()

    def stop(self) -> None:
        """Stop watching; if the exit has begun, wait until on_idle has returned."""
        self._repeater.stop()

    def check(self) -> bool:
        """Exit if idle; True once on_idle has been called."""
        now = time.time()
        if not self._idle(self.store, now):
            return False
        # Check again and step down in one write transaction: a front that starts now either
        # beat before it (and is seen) or finds this worker stopping and starts another.
        with self.store.write() as tx:
            if not self._idle(tx, now):
                return False
            tx.runtime.mark_stopping(self.worker_id)
        log.info("no front alive for %s and no stage pending: autostarted worker exiting",
                 format_age(now - self.last_front_seen))
        self.on_idle()
        return True

    def _idle(self, s: Session, now: float) -> bool:
        fronts = s.runtime.front_rows()
        if any(row.alive(now - self.alive_s) for row in fronts):
            self.last_front_seen = now
            return False
        # A front that was killed was last alive at its last beat.
        self.last_front_seen = max([self.last_front_seen] + [row.heartbeat_time for row in fronts])
        if now - self.last_front_seen < self.idle_s:
            return False
        queue = s.stages.queue_figures(now)
        return queue["pending"] + queue["running"] == 0


# -- worker pid files ----------------------------------------------------------------------

def pid_file(data_dir: Path, pid: int | None = None) -> Path:
    return data_dir / f"worker-{os.getpid() if pid is None else pid}.pid"


def write_pid_file(data_dir: Path) -> Path:
    """data_dir/worker-<pid>.pid holding this process's pid (removed at a clean exit)."""
    path = pid_file(data_dir)
    path.write_text(f"{os.getpid()}\n", encoding="ascii")
    return path


def read_pid_files(data_dir: Path) -> dict[int, Path]:
    """{pid: file} of every worker pid file in data_dir, stale ones included."""
    found = {}
    for path in data_dir.glob("worker-*.pid"):
        try:
            found[int(path.read_text(encoding="ascii").split()[0])] = path
        except (OSError, ValueError, IndexError):
            continue  # half-written or foreign: not ours to judge
    return found


def local_workers(data_dir: Path, rows: list[ProcessRow], alive_since: float) -> dict[int, str]:
    """{pid: what it is} of this data_dir's worker processes on this host: those with a fresh
    heartbeat row, and those whose pid file names a live aokun-worker (one that has not beaten
    yet, or hangs). Pid files of processes that are gone are removed."""
    here = socket.gethostname()
    found = {row.pid: row.kind + (", stopping" if row.stopping else "")
             for row in rows if row.hostname == here and row.heartbeat_time >= alive_since
             and platform.pid_alive(row.pid)}
    for pid, path in read_pid_files(data_dir).items():
        if not platform.pid_alive(pid):
            path.unlink(missing_ok=True)
        elif pid not in found and _is_worker_of(pid, data_dir):
            found[pid] = "no fresh heartbeat"
    return found


def _is_worker_of(pid: int, data_dir: Path) -> bool:
    # A pid file can outlive its worker and its pid be reused: trust it only for a process
    # whose command line is an aokun-worker's (and names this data_dir, if it names one).
    args = platform.command_line(pid)
    if not args or not any("aokun_worker" in a or a.endswith("aokun-worker") for a in args):
        return False
    if "--data-dir" in args[:-1]:
        return Path(args[args.index("--data-dir") + 1]).resolve() == data_dir.resolve()
    return True


def stop_processes(pids: list[int], timeout_s: float) -> list[int]:
    """Ask each process to stop and wait up to timeout_s; return those still running."""
    for pid in pids:
        platform.terminate(pid)
    deadline = time.monotonic() + timeout_s
    running = [pid for pid in pids if platform.pid_alive(pid)]
    while running and time.monotonic() < deadline:
        time.sleep(0.1)
        running = [pid for pid in running if platform.pid_alive(pid)]
    return running
