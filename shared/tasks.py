"""Task definitions shared by the front (which enqueues) and the worker (which runs them).

One message per memory version: process(memory_id, content_hash, stages), or a drain message
process(0, "", [stage]) that means "run the next batch of whatever of this stage is waiting"
(used for large backlogs, and chained while batches come back full). Messages are only
hints — the stage rows say what still needs doing — so a lost or duplicated message is
harmless: the reconciler re-enqueues what is pending, and a stage that is already done,
leased elsewhere, or for an older content hash is skipped. For the same reason a queue that
cannot be written is a StorageError the caller logs and goes on from, not a crash.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from shared.errors import StorageError
from shared.store.model.stages import StageKey

if TYPE_CHECKING:
    from huey import Huey

log = logging.getLogger("aokun.queue")

Processor = Callable[[int, str, Sequence[str]], None]
DRAIN = 0  # memory id of a drain message (real ids start at 1)


class Enqueuer:
    """Puts memory stages on the Huey queue. Built with a processor in the worker only."""

    def __init__(self, huey: Huey, processor: Processor | None = None):
        self.huey = huey

        @huey.task(name="aokun.process")
        def process(memory_id: int, content_hash: str, stages: list[str]) -> None:
            if processor is None:
                raise RuntimeError("this process only enqueues; run aokun-worker to process")
            processor(memory_id, content_hash, stages)

        self._process = process

    def enqueue(self, keys: Iterable[StageKey], delay_s: float = 0.0) -> int:
        """Queue the stages, one message per memory version; return the number of messages.
        StorageError if the queue file cannot take them (a damaged one is replaced at once)."""
        grouped: dict[tuple[int, str], list[str]] = defaultdict(list)
        for key in keys:
            grouped[(key.memory_id, key.content_hash)].append(key.stage)
        with self._queue_errors("queue work"):
            for (memory_id, content_hash), stages in grouped.items():
                if delay_s > 0:
                    self._process.schedule((memory_id, content_hash, stages), delay=delay_s)
                else:
                    self._process(memory_id, content_hash, stages)
        return len(grouped)

    def drain(self, stage: str) -> None:
        """Queue a message that runs the next waiting batch of `stage`, whichever memories."""
        with self._queue_errors("queue work"):
            self._process(DRAIN, "", [stage])

    def pending_count(self) -> int:
        """Messages waiting in the queue (scheduled retries not counted)."""
        with self._queue_errors("count queued work"):
            return self.huey.pending_count()

    @contextmanager
    def _queue_errors(self, doing: str) -> Iterator[None]:
        """Raw SQLite (or Redis) errors from the queue leave as one-line StorageErrors (damage
        is already one: the queue's storage replaces a damaged file and says so)."""
        errors = getattr(self.huey, "aokun_errors", (sqlite3.Error,))
        try:
            yield
        except errors as exc:
            where = getattr(self.huey, "aokun_where", None) or getattr(self.huey.storage, "filename",
                                                                       "the queue file")
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise StorageError(f"could not {doing} in {where} ({detail}); nothing is lost: the "
                               "stage rows keep the work and the reconciler queues it") from exc
