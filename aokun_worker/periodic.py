"""Periodic jobs that survive downtime.

Each job's last finished run lives in SQLite (periodic_runs). A scheduler thread in every
worker checks once a second which jobs are due (a read) and claims each due run with a
compare-and-set (a write, periodic_claims), so however many workers run, one of them runs it.
Only when the run finished is it recorded as the job's last run: a run cut off (the worker
killed mid backup) leaves a claim whose process is gone, which the next start or tick takes
over, so the job runs again. A job gets the time of its previous finished run, so one that
fell due while no worker was up runs at start and can catch up on what it missed.

Jobs that follow changes rather than the clock (the FAISS snapshots) run once those changes
settle: each worker watches for itself, and the job makes a second run harmless.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from shared.errors import StorageError
from shared.logs import log_failure
from shared.store.interface import Store

log = logging.getLogger("aokun.periodic")

# A claim not renewed for this long is taken over even if its process still seems alive (a
# pid reused, a worker on another host that vanished: its pid cannot be checked from here).
# While its job runs the claimer renews the lease every third of it, so a long backup keeps
# its claim and a vanished claimer's job is taken over within a couple of minutes.
CLAIM_LEASE_S = 120.0


@dataclass(frozen=True)
class PeriodicJob:
    name: str
    interval_s: float
    run: Callable[[float | None, float], str]
    """run(previous_run_time_or_None, now) -> a one-line summary of what it changed."""


class PeriodicScheduler:
    def __init__(self, store: Store, jobs: Sequence[PeriodicJob], tick_s: float = 1.0,
                 clock: Callable[[], float] = time.time, owner: str | None = None,
                 lease_s: float = CLAIM_LEASE_S):
        self.store = store
        self.owner = owner or f"scheduler-{uuid.uuid4().hex[:12]}"
        self.lease_s = lease_s
        self.jobs = list(jobs)
        self.tick_s = tick_s
        self.clock = clock
        self._failing: dict[str, int] = {}  # job name -> failed runs in a row
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="periodic", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def run_due(self) -> list[str]:
        """Run every job that is due now; return the names of those run. A job that fails
        (or cannot be claimed) is logged and does not keep the others from running."""
        last_runs = self.store.runtime.periodic_runs()
        ran = []
        for job in self.jobs:
            previous = last_runs.get(job.name)
            if previous is not None and self.clock() - previous < job.interval_s:
                continue
            try:
                if self._claim_and_run(job):
                    ran.append(job.name)
                self._recovered(job.name)
            except Exception:
                self._failed(job.name)
        return ran

    def _claim_and_run(self, job: PeriodicJob) -> bool:
        now = self.clock()
        with self.store.write() as tx:
            due, previous = tx.runtime.claim_periodic_run(job.name, job.interval_s, now, self.owner,
                                                          os.getpid(), socket.gethostname(), self.lease_s)
        if not due:
            return False  # another worker is running it
        try:
            with self._renewing(job.name):
                summary = job.run(previous, now)
            with self.store.write() as tx:  # only now is it the job's last run
                tx.runtime.finish_periodic_run(job.name, self.owner, now)
        except BaseException:
            self._release(job.name)
            raise
        log.info("periodic %s: %s", job.name, summary)
        return True

    @contextmanager
    def _renewing(self, name: str) -> Iterator[None]:
        """Renew the claim on `name` every third of the lease while the block runs."""
        done = threading.Event()

        def renew() -> None:
            while not done.wait(self.lease_s / 3):
                try:
                    with self.store.write() as tx:
                        tx.runtime.renew_periodic_claim(name, self.owner, self.clock() + self.lease_s)
                except Exception:
                    log_failure(log, "periodic %s: could not renew its claim", name)

        renewer = threading.Thread(target=renew, name=f"periodic-{name}-lease", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            done.set()
            renewer.join(timeout=30)

    def _release(self, name: str) -> None:
        """Let go of a claim whose run failed or could not be recorded: the job stays due. If
        even that cannot be written, this scheduler's own next claim takes it over anyway."""
        try:
            with self.store.write() as tx:
                tx.runtime.release_periodic_run(name, self.owner)
        except Exception:
            log.warning("periodic %s: could not let go of its claim; it is taken over later", name)

    def _failed(self, name: str) -> None:
        self._failing[name] = self._failing.get(name, 0) + 1
        if self._failing[name] == 1:  # one traceback per outage, not one per tick
            error = sys.exc_info()[1]
            if isinstance(error, StorageError):  # says what is wrong in one line already
                log.warning("periodic job %s failed; it stays due and is tried again: %s", name, error)
            else:
                log.exception("periodic job %s failed; it stays due and is tried again", name)  # noqa: LOG004 - called in an except block  # noqa: LOG004 - called in an except block

    def _recovered(self, name: str) -> None:
        failures = self._failing.pop(name, 0)
        if failures:
            log.warning("periodic job %s ran again after %d failure(s)", name, failures)

    def _loop(self) -> None:
        # Whatever a tick raises, the scheduler keeps ticking: jobs fall due again.
        while not self._stop.is_set():
            try:
                self.run_due()
            except Exception:
                self._failed("(scheduler)")
            else:
                self._recovered("(scheduler)")
            self._stop.wait(self.tick_s)


_NOTHING = object()  # no value seen yet


class SettleWatch:
    """Runs a job once what it watches has stopped changing for `settle_s` (debounced), or
    after `max_wait_s` of changes that never settle; again only after the next change. The
    first check after start counts as a change, so a job missed while no worker ran runs.

    It reads the watched value once a tick rather than following files with watchfiles: the
    value is a number in SQLite (the vector change sequence), and file events on the database
    would fire for every write of any kind — heartbeats every few seconds included — each
    still needing this one-row read to tell whether the number moved."""

    def __init__(self, name: str, read: Callable[[], object], run: Callable[[], str],
                 settle_s: float, max_wait_s: float, tick_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        self.name, self.read, self.run = name, read, run
        self.settle_s, self.max_wait_s, self.tick_s, self.clock = settle_s, max_wait_s, tick_s, clock
        self._seen: object = _NOTHING  # the value at the last check
        self._changed_at = 0.0  # when it last moved
        self._done: object = _NOTHING  # the value the last successful run saw
        self._waiting_since: float | None = None  # first change not run for yet
        self._retry_at = 0.0
        self._failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"settle-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)

    def check(self) -> bool:
        """Run the job if it is due now; True if it ran."""
        value, now = self.read(), self.clock()
        if value != self._seen:
            self._seen, self._changed_at = value, now
        if value == self._done:
            self._waiting_since = None
            return False
        if self._waiting_since is None:
            self._waiting_since = now
        settled = now - self._changed_at >= self.settle_s
        overdue = now - self._waiting_since >= self.max_wait_s
        if not (settled or overdue) or now < self._retry_at:
            return False
        try:
            summary = self.run()
        except Exception:
            self._failures += 1
            # Not every tick: a job that failed (a full disk) waits a settle period at least.
            self._retry_at = now + max(self.settle_s, 60.0)
            if self._failures == 1:
                log_failure(log, "%s failed; tried again in a while", self.name)
            return False
        if self._failures:
            log.warning("%s ran again after %d failure(s)", self.name, self._failures)
        self._done, self._waiting_since, self._failures = value, None, 0
        log.info("%s: %s", self.name, summary)
        return True

    def _loop(self) -> None:
        unreadable = False
        while not self._stop.wait(self.tick_s):
            try:
                self.check()
            except Exception:  # the read failed (database busy past its timeout): next tick
                if not unreadable:
                    log_failure(log, "%s: checking for changes failed; trying again", self.name)
                unreadable = True
            else:
                unreadable = False

