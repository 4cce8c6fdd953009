"""Runs memory stages: lease in the stage journal, compute, then store + mark done together."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from aokun_worker.handlers import StageHandler
from shared.config import QueueConfig
from shared.errors import AokunError
from shared.store import stages
from shared.store.db import Database
from shared.store.documents import DocumentStore
from shared.store.stages import StageKey
from shared.tasks import DRAIN, Enqueuer

log = logging.getLogger("aokun.worker")


@dataclass(frozen=True)
class RunnerParts:
    db: Database
    documents: DocumentStore
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
        for stage in stages.STAGES:
            if stage not in stage_names:
                continue
            if memory_id == DRAIN:
                self.run_next(stage)
            else:
                self.run(StageKey(memory_id, stage, content_hash))

    def run(self, key: StageKey) -> int:
        """Run one stage (plus whatever else of that stage is waiting); return stages done."""
        handler = self.parts.handlers[key.stage]
        return self._run_claimed(handler, self._claim(key, handler.batch_size))

    def run_next(self, stage: str) -> tuple[int, int]:
        """Claim and run the next batch of due pending rows of a stage: (claimed, done)."""
        handler = self.parts.handlers[stage]
        p = self.parts
        with p.db.write() as tx:
            keys = stages.claim_more(tx, stage, p.owner, p.clock(), p.queue.lease_s, handler.batch_size)
        return len(keys), self._run_claimed(handler, keys)

    def _run_claimed(self, handler: StageHandler, keys: list[StageKey]) -> int:
        if not keys:
            return 0
        if len(keys) >= handler.batch_size and self.enqueuer is not None:
            # A full batch: more is probably waiting. Chain a drain so a backlog empties at
            # full speed without one queue message per memory.
            self.enqueuer.drain(handler.stage)
        docs = self.parts.documents.get_many([k.memory_id for k in keys])
        live = [k for k in keys if k.memory_id in docs]
        try:
            results = handler.compute([docs[k.memory_id] for k in live]) if live else []
        except Exception as exc:  # a stage body may fail any way it likes; we record it
            self._fail(live, exc)
            return 0
        return self._complete(handler, live, docs, results)

    def _claim(self, key: StageKey, batch_size: int) -> list[StageKey]:
        p = self.parts
        now = p.clock()
        with p.db.write() as tx:
            keys = [key] if stages.claim(tx, key, p.owner, now, p.queue.lease_s) else []
            if batch_size > 1:
                keys += stages.claim_more(tx, key.stage, p.owner, now, p.queue.lease_s,
                                          batch_size - len(keys))
        return keys

    def _complete(self, handler: StageHandler, keys: list[StageKey], docs, results) -> int:
        p = self.parts
        done = 0
        with p.db.write() as tx:
            now = p.clock()
            for key, result in zip(keys, results):
                # complete() first: it fails if the memory was edited or the lease lost.
                if stages.complete(tx, key, p.owner, now):
                    handler.store(tx, docs[key.memory_id], result, now)
                    done += 1
        return done

    def _fail(self, keys: list[StageKey], exc: Exception) -> None:
        p = self.parts
        error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, AokunError):
            log.warning("%s stage failed for memories %s: %s", keys[0].stage,
                        [k.memory_id for k in keys], error)
        else:
            log.exception("%s stage crashed for memories %s", keys[0].stage, [k.memory_id for k in keys])
        retries = []
        with p.db.write() as tx:
            for key in keys:
                delay = stages.fail(tx, key, p.owner, error, p.clock(), p.queue.max_retries,
                                    self.retry_delay)
                if delay is not None:
                    retries.append((key, delay))
        if self.enqueuer is not None:
            for key, delay in retries:
                self.enqueuer.enqueue([key], delay_s=delay)

    def retry_delay(self, attempts: int) -> float:
        """Exponential backoff: retry_base_s, doubling per attempt, capped at retry_max_s."""
        q = self.parts.queue
        return min(q.retry_max_s, q.retry_base_s * 2 ** max(attempts - 1, 0))
