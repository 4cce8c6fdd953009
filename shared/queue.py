"""The job queue: Huey over its own SQLite file, kept apart from the main database.

Huey's tables have generic names and it deletes a task before running it, so the queue
only carries hints; the stage rows in the main database are the truth.
"""

from __future__ import annotations

from shared.config import StorageConfig


def open_queue(storage: StorageConfig):
    """A SqliteHuey on data_dir/queue.db (imported here so importing this module is cheap)."""
    from huey import SqliteHuey

    storage.data_dir.mkdir(parents=True, exist_ok=True)
    # results=False: nothing reads task results, and stored ones would pile up forever.
    return SqliteHuey(name="aokun", filename=str(storage.queue_path), results=False,
                      timeout=storage.busy_timeout_ms / 1000)
