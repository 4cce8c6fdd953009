"""Runs memory stages: lease in the stage journal, compute, then store + mark done together.

Whatever goes wrong between the claim and the completion — reading the documents, the
computation, storing one memory's result, the COMMIT — is recorded on the stage rows with its
error and backs off, so every attempt ends on its row and a stage ends done or failed. A batch
that fails as a whole is run again memory by memory, so that one memory the stage cannot
handle fails alone (unless the failure is the database's or the embedding service's, which
every memory shares).
Recording needs a writable database: while it is locked past busy_timeout (or otherwise will
not take a write) the runner retries the completion briefly, then gives the leases back as
soon as a write gets through, instead of leaving the stages running until the lease ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from aokun_worker.handlers import StageHandler
from shared.config import QueueConfig
from shared.errors import AokunError, EmbeddingError, StorageError
from shared.logs import RateLimitedWarnings
from shared.store.interface import Session, Store
from shared.store.model.stages import EMBED, STAGES, StageKey, dependents
from shared.tasks import DRAIN, Enqueuer

log = logging.getLogger("aokun.worker")
# A queue that is away fails every batch's retries: one line a minute says so.
_queue_warnings = RateLimitedWarnings(log)

# The database would not take a write: busy past busy_timeout, disk full, I/O error...
STORAGE_ERRORS = (StorageError,)
# Failures of what every memory of a batch shares (the database, the embedding service): each
# memory alone would fail the same way, only N times slower. Any other failure of a batch is
# looked for memory by memory, so one memory the stage cannot handle fails alone.
BATCH_ERRORS = (StorageError, EmbeddingError)
# Pauses between tries to record a finished batch; each try also waits busy_timeout in SQLite.
COMPLETE_RETRY_DELAYS_S = (0.1, 0.3)
# Giving the leases back is retried, at most this far apart, until it gets through.
RELEASE_RETRY_MAX_S = 1.0

Failure = tuple[StageKey, str]


@dataclass(frozen=True)
class RunnerParts:
    store: Store
    handlers: Mapping[str, StageHandler]
    queue: QueueConfig
    owner: str
    clock: Callable[[], float] = time.time


class StageRunner:
    """Processes the stages named in a queue message, batching where a handler allows."""

    def __init__(self, parts: RunnerParts, enqueuer: Enqueuer | None = None):
        self.parts = parts
        self.enqueuer = enqueuer

    def process(self, memory_id: int, content_hash: str, stage_names: Sequence[str]) -> None:
        """Entry point for the queue task: run each named stage of one memory version, or
        for a drain message, the next waiting batch of each named stage."""
        # A stage named runs its dependents after it (they read its fresh output).
        named = set(stage_names)
        named |= {later for stage in stage_names for later in dependents(stage)}
        for stage in STAGES:
            if stage not in named:
                continue
            if stage != EMBED and EMBED in self.parts.handlers:
                self.embed_waiting()
            if memory_id == DRAIN:
                self.run_next(stage)
            else:
                self.run(StageKey(memory_id, stage, content_hash))

    def embed_waiting(self) -> int:
        """Embed every memory waiting for it before any later stage runs: a memory is
        searchable by meaning once its own vectors are written, and its facts and graph
        entries can follow (a burst of memories is all found by meaning in the time the
        embedder takes, not after everything else). Only due rows: one that failed waits for
        its retry time, and a batch that finished nothing ends the round (the rest wait for
        their messages). Returns how many were done."""
        done = 0
        while True:
            claimed, finished = self.run_next(EMBED)
            done += finished
            if not claimed or not finished:
                return done

    def run(self, key: StageKey) -> int:
        """Run one stage (plus whatever else of that stage is waiting); return stages done."""
        handler = self.parts.handlers[key.stage]
        started = time.monotonic()
        try:
            keys = self._claim(key, handler.batch_size)
        except STORAGE_ERRORS as exc:
            # Nothing was leased; only the message would be lost, so send it again later.
            log.warning("cannot lease %s of memory %d (%s); retrying later", key.stage, key.memory_id, exc)
            self._enqueue_retries([(key, self.retry_delay(1))])
            return 0
        return self._run_claimed(handler, keys, started)

    def run_next(self, stage: str) -> tuple[int, int]:
        """Claim and run the next batch of due pending rows of a stage: (claimed, done)."""
        handler = self.parts.handlers[stage]
        p = self.parts
        started = time.monotonic()
        try:
            with p.store.write() as tx:
                keys = tx.stages.claim_more(stage, p.owner, p.clock(), p.queue.lease_s, handler.batch_size)
        except STORAGE_ERRORS as exc:
            # The rows stay pending; the reconciler queues them again.
            log.warning("cannot lease the next %s batch (%s); the reconciler will queue it", stage, exc)
            return 0, 0
        return len(keys), self._run_claimed(handler, keys, started)

    def _claim(self, key: StageKey, batch_size: int) -> list[StageKey]:
        p = self.parts
        now = p.clock()
        with p.store.write() as tx:
            keys = [key] if tx.stages.claim(key, p.owner, now, p.queue.lease_s) else []
            if batch_size > 1:
                keys += tx.stages.claim_more(key.stage, p.owner, now, p.queue.lease_s,
                                             batch_size - len(keys))
        return keys

    def _run_claimed(self, handler: StageHandler, keys: list[StageKey], claimed_at: float) -> int:
        if not keys:
            return 0
        # Past this moment (monotonic) the leases may be taken over: record nothing after it.
        lease_end = claimed_at + self.parts.queue.lease_s
        self._chain_drain(handler, len(keys))
        try:
            docs, results = self._compute(handler, keys)
            failures: list[Failure] = []
        except Exception as exc:  # a stage body may fail any way it likes; we record it
            if len(keys) == 1 or isinstance(exc, BATCH_ERRORS):
                self._log_failure(keys, exc)
                self._release(keys, describe(exc), lease_end)
                return 0
            docs, results, failures = self._compute_alone(handler, keys, exc)
        return self._finish(handler, keys, docs, results, failures, lease_end)

    def _compute(self, handler: StageHandler, keys: list[StageKey]):
        """Read the memories and compute their results: (documents by id, {key: result}) for
        those that still exist."""
        docs = self.parts.store.documents.get_many([k.memory_id for k in keys])
        live = [k for k in keys if k.memory_id in docs]
        results = list(handler.compute([docs[k.memory_id] for k in live])) if live else []
        if len(results) != len(live):
            raise RuntimeError(f"the {handler.stage} stage returned {len(results)} results"
                               f" for {len(live)} memories")
        return docs, dict(zip(live, results))

    def _compute_alone(self, handler: StageHandler, keys: list[StageKey], batch_error: Exception):
        """After a batch failed: each memory read and computed on its own, so that one whose
        text, date or row the stage cannot handle fails alone and the others go on. Return
        (documents, results, failures)."""
        log.warning("%s stage failed for a batch of %d memories (%s); running each alone",
                    handler.stage, len(keys), describe(batch_error))
        docs, results, failures = {}, {}, []
        for index, key in enumerate(keys):
            try:
                found, computed = self._compute(handler, [key])
            except Exception as exc:
                self._log_failure([key], exc)
                if isinstance(exc, BATCH_ERRORS):  # the database or service, not this memory
                    failures += [(k, describe(exc)) for k in keys[index:]]
                    break
                failures.append((key, describe(exc)))
                continue
            docs.update(found)
            results.update(computed)
        return docs, results, failures

    def _chain_drain(self, handler: StageHandler, claimed: int) -> None:
        if claimed < handler.batch_size or self.enqueuer is None:
            return
        # A full batch: more is probably waiting. Chain a drain so a backlog empties at full
        # speed without one queue message per memory. Without it the reconciler still gets there.
        try:
            self.enqueuer.drain(handler.stage)
        except Exception as exc:
            _queue_warnings.warning(str(exc), "cannot queue the next %s batch (%s); the reconciler will",
                                    handler.stage, exc)

    def _finish(self, handler: StageHandler, keys: list[StageKey], docs, results,
                failures: list[Failure], lease_end: float) -> int:
        """Store the results, mark the stages done and record the memories that failed alone,
        retrying briefly if the database will not take the write; failing that, give the
        leases back."""
        tries = 0
        while True:
            try:
                done, retries = self._complete(handler, keys, docs, results, failures)
            except Exception as exc:
                if tries == len(COMPLETE_RETRY_DELAYS_S) or not isinstance(exc, STORAGE_ERRORS):
                    self._log_failure(keys, exc)
                    self._release(keys, describe(exc), lease_end)
                    return 0
                pause, tries = COMPLETE_RETRY_DELAYS_S[tries], tries + 1
                log.warning("cannot record %d %s stage(s) (%s); retrying in %.1f s",
                            len(keys), handler.stage, exc, pause)
                time.sleep(pause)
                continue
            self._enqueue_retries(retries)
            return done

    def _complete(self, handler: StageHandler, keys: list[StageKey], docs, results,
                  computed_failures: list[Failure]):
        """One transaction: each memory's result stored and its stage done, or its failure
        recorded; return (stages done, [(key, backoff)] to retry)."""
        p = self.parts
        done, failures = 0, list(computed_failures)
        failed = {key for key, _ in computed_failures}
        with p.store.write() as tx:
            now = p.clock()
            for key in keys:
                if key in failed:
                    continue
                if key not in results:
                    failures.append((key, f"memory {key.memory_id} no longer exists"))
                    continue
                completed, error = self._store_one(tx, handler, key, docs[key.memory_id], results[key], now)
                done += completed
                if error:
                    log.warning("%s stage could not store memory %d: %s", key.stage, key.memory_id, error)
                    failures.append((key, error))
            retries = self._record_failures(tx, failures, now)
        return done, retries

    def _store_one(self, tx: Session, handler: StageHandler, key: StageKey, document,
                   result, now: float) -> tuple[bool, str | None]:
        """Store one memory's result in a savepoint, so that a row that cannot be stored fails
        only its own stage: (done, error). Not done and no error: the lease was lost or the
        memory edited meanwhile, and nothing was written."""
        try:
            with tx.savepoint("stage_result"):
                # complete() first: it fails if the memory was edited or the lease lost.
                completed = tx.stages.complete(key, self.parts.owner, now)
                if completed:
                    handler.store(tx, document, result, now)
            return completed, None
        except Exception as exc:
            if not tx.transaction_alive():
                raise  # the engine rolled the whole transaction back (disk full, I/O): not this row's
            # A statement the store refused is recorded in the engine's own words, as the row's
            # error ("IntegrityError: ..."), not as the store's wrapping of it.
            cause = exc.__cause__ if isinstance(exc, StorageError) and exc.__cause__ is not None else exc
            return False, describe(cause)

    def _release(self, keys: list[StageKey], error: str, lease_end: float) -> None:
        """Record a failed attempt of each stage (pending after a backoff, or failed for good),
        retrying until the database takes the write or the lease ends."""
        failures = [(key, error) for key in keys]
        pause, tries = COMPLETE_RETRY_DELAYS_S[0], 0
        while True:
            try:
                with self.parts.store.write() as tx:
                    retries = self._record_failures(tx, failures, self.parts.clock())
                break
            except STORAGE_ERRORS as exc:
                if time.monotonic() + pause >= lease_end:
                    log.error("cannot release %d %s stage(s) before their lease ends (%s); the"
                              " reconciler will take them back", len(keys), keys[0].stage, exc)
                    return
                if tries == 0:
                    log.warning("cannot release %d %s stage(s) (%s); retrying until the database"
                                " takes it", len(keys), keys[0].stage, exc)
                time.sleep(pause)
                pause, tries = min(pause * 2, RELEASE_RETRY_MAX_S), tries + 1
        if tries:
            log.info("released %d %s stage(s) after %d more tries", len(keys), keys[0].stage, tries)
        self._enqueue_retries(retries)

    def _record_failures(self, tx: Session, failures: list[Failure],
                         now: float) -> list[tuple[StageKey, float]]:
        p = self.parts
        retries = []
        for key, error in failures:
            delay = tx.stages.fail(key, p.owner, error, now, p.queue.max_retries, self.retry_delay)
            if delay is not None:
                retries.append((key, delay))
        return retries

    def _enqueue_retries(self, retries: list[tuple[StageKey, float]]) -> None:
        if self.enqueuer is None or not retries:
            return
        try:
            for key, delay in retries:
                self.enqueuer.enqueue([key], delay_s=delay)
        except Exception as exc:
            # The rows are pending and due later; the reconciler queues them if nobody did.
            _queue_warnings.warning(str(exc), "cannot queue %d stage retries (%s); the reconciler will",
                                    len(retries), exc)
            self._forget_enqueued([key for key, _ in retries])

    def _forget_enqueued(self, keys: list[StageKey]) -> None:
        try:
            with self.parts.store.write() as tx:
                tx.stages.mark_enqueued(keys, None)
        except STORAGE_ERRORS as exc:
            log.warning("cannot mark %d stage(s) as unqueued (%s); the reconciler queues them"
                        " once the queue is empty", len(keys), exc)

    def _log_failure(self, keys: list[StageKey], exc: Exception) -> None:
        ids = [k.memory_id for k in keys]
        if isinstance(exc, AokunError):
            log.warning("%s stage failed for memories %s: %s", keys[0].stage, ids, describe(exc))
        else:
            log.error("%s stage crashed for memories %s", keys[0].stage, ids, exc_info=exc)

    def retry_delay(self, attempts: int) -> float:
        """Exponential backoff: retry_base_s, doubling per attempt, capped at retry_max_s."""
        q = self.parts.queue
        return min(q.retry_max_s, q.retry_base_s * 2 ** max(attempts - 1, 0))


def describe(exc: BaseException) -> str:
    """An exception as the one line kept in a stage's last_error."""
    return f"{type(exc).__name__}: {exc}"
