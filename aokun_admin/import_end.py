"""What every `aokun import` does with the rows it stores: queue them for the workers as it goes
and once more at the end, plan from the store's new size, and say how long until they are found
by meaning."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from shared.catch_up import catch_up
from shared.errors import AokunError

# While an import runs, the rows it stored so far are queued this often, so a running worker
# embeds them meanwhile (queueing each row instead halved the rows imported per second).
QUEUE_EVERY_S = 5.0


class QueueAsYouGo:
    """Queues what an import has stored, at most every QUEUE_EVERY_S seconds."""

    def __init__(self, admin, clock: Callable[[], float] = time.monotonic):
        self.admin, self.clock = admin, clock
        self.last = clock()

    def tick(self) -> None:
        now = self.clock()
        if now - self.last < QUEUE_EVERY_S:
            return
        self.last = now
        try:
            self.admin.requeue()
        except AokunError:
            pass  # finish_import queues every stored row again, and says so if it cannot


def finish_import(admin, imported: int) -> None:
    if imported:
        # A store that grew at once is planned from its new size now, not at the next hourly
        # housekeeping: stale planner statistics slow recall severalfold (docs/performance.md).
        admin.store.refresh_statistics()
    # Whatever the last QueueAsYouGo tick left. Also when nothing new came in: the rows an
    # import killed before this point committed are queued by the run that finishes it.
    try:
        admin.requeue()
    except AokunError as exc:
        print(f"aokun import: the memories are stored but could not be queued ({exc}); a worker's "
              "reconciler queues them when it starts", file=sys.stderr)
    # Found by words already; by meaning once a worker has embedded them. Printed before the
    # import's summary, whose line stays the last (scripts read it).
    line = catch_up(admin.store, admin.config.worker.heartbeat_timeout_s).line()
    print(f"{line} (aokun status --follow shows it as it goes)")
