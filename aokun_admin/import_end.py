"""What every `aokun import` does once its rows are stored: plan from the store's new size,
queue the new memories for the workers, and say how long until they are found by meaning."""

from __future__ import annotations

import sys

from shared.catch_up import catch_up
from shared.errors import AokunError


def finish_import(admin, imported: int) -> None:
    if imported:
        # A store that grew at once is planned from its new size now, not at the next hourly
        # housekeeping: stale planner statistics slow recall severalfold (docs/performance.md).
        admin.store.refresh_statistics()
    # Stages are queued in bulk once the import ends, not row by row (queueing each row
    # halved the rows imported per second). Also when nothing new came in: the rows an
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
