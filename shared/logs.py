"""One logging setup for every process (front, worker, panel, admin CLI).

Every line on stderr reads `<time> <logger> <LEVEL> <message>`, whichever process wrote it and
whether it came from Aokun, uvicorn or a library. Libraries are held at WARNING unless the
level asked for is DEBUG: faiss's loader reports each optional AVX build it does not find as
a `ModuleNotFoundError` at INFO, and Huey logs every task twice and says "Periodic tasks are
disabled." (Aokun runs its own periodic jobs: aokun_worker/periodic.py). Of Huey's consumer
only the lines about its start and its stop (graceful or not) are kept. A config reload is
news in every process, so `aokun.config` logs at INFO even when the rest is at WARNING.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable

from shared.errors import AokunError

FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

# psycopg's pool logs every failed connection attempt while a PostgreSQL server is away (a
# few a second); the store says what is wrong in one line, once per outage (log_failure).
HUSHED_LIBRARIES = ("psycopg.pool",)
# Libraries whose INFO lines are noise to an Aokun user: shown from WARNING up, unless DEBUG.
QUIET_LIBRARIES = ("faiss", "faiss.loader", "huey", "huey.api", "huey.consumer.Scheduler", "httpx",
                   "httpcore", "httpx2", "httpcore2", "watchfiles", "watchfiles.main", "urllib3", "asyncio", "mcp",
                   "sse_starlette")
# Aokun's own loggers that speak at INFO whatever the process's level (up to WARNING).
ALWAYS_INFO = ("aokun.config",)

_HANDLER_NAME = "aokun"
# What Huey's consumer says that a worker's reader needs: it consumes, a signal came, how it
# stops. Its list of tasks, "Periodic tasks are disabled." and the like are left out.
HUEY_CONSUMER_KEPT = ("Huey consumer started", "Received ", "Shutting down", "All workers have stopped")


class HueyConsumerLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or str(record.msg).startswith(HUEY_CONSUMER_KEPT)


def configure_logging(level: str | int = "WARNING", stream=None) -> None:
    """Log to stderr (or `stream`) in FORMAT at `level`; calling again replaces the setup.

    Must run before anything configures logging its own way: the MCP SDK's basicConfig
    (with its rich handler) does nothing once the root logger has our handler."""
    level = _level(level)
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
    library_level = level if level <= logging.DEBUG else max(level, logging.WARNING)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(library_level)
    for name in HUSHED_LIBRARIES:
        logging.getLogger(name).setLevel(level if level <= logging.DEBUG else logging.CRITICAL)
    for name in ALWAYS_INFO:
        logging.getLogger(name).setLevel(min(level, logging.INFO))
    consumer = logging.getLogger("huey.consumer")
    consumer.setLevel(level)  # not the "huey" level: its kept lines show at the process's level
    for old in [f for f in consumer.filters if isinstance(f, HueyConsumerLines)]:
        consumer.removeFilter(old)
    if level > logging.DEBUG:
        consumer.addFilter(HueyConsumerLines())


def _level(level: str | int) -> int:
    if isinstance(level, int):
        return level
    name = level.upper()
    if name not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}; got {level!r}")
    return getattr(logging, name)


def uvicorn_log_config() -> dict:
    """A uvicorn `log_config` that leaves its loggers' lines to our root handler."""
    return {"version": 1, "disable_existing_loggers": False,
            "loggers": {name: {"handlers": [], "propagate": True}
                        for name in ("uvicorn", "uvicorn.error", "uvicorn.access")}}


def log_failure(log: logging.Logger, message: str, *args) -> None:
    """Log the exception being handled: one line for our own errors (a StorageError already
    says what is wrong and what to do: the database is away, locked, full), a traceback for
    anything else (a bug)."""
    error = sys.exc_info()[1]
    if isinstance(error, AokunError):
        log.warning(message + ": %s", *args, error)  # noqa: G003 - the caller's format, extended
    else:
        log.exception(message, *args)  # noqa: LOG004 - called in an except block


class RateLimitedWarnings:
    """Warnings that would repeat for as long as one cause lasts (a server away, met by every
    request or every polling thread) logged at most once per `every_s` for each cause; the
    next line of a cause says how many were left out. `cause` is what tells two problems
    apart (the error's one-line text, say), not the message, which may carry counts."""

    def __init__(self, log: logging.Logger, every_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic):
        self.log, self.every_s, self.clock = log, every_s, clock
        self._lock = threading.Lock()
        self._causes: dict[str, tuple[float, int]] = {}  # cause -> (last logged, left out since)

    def warning(self, cause: str, message: str, *args) -> bool:
        """Log `message % args` unless `cause` was logged less than every_s ago; True if logged."""
        now = self.clock()
        with self._lock:
            last, left_out = self._causes.get(cause, (None, 0))
            if last is not None and now - last < self.every_s:
                self._causes[cause] = (last, left_out + 1)
                return False
            self._causes[cause] = (now, 0)
        if left_out and last is not None:  # lines are left out only after a logged one
            message += " (%d more like it in the last %.0f s not logged)"
            args = (*args, left_out, now - last)
        self.log.warning(message, *args)
        return True

    def clear(self) -> bool:
        """The causes are over (the server answers again): the next warning of any is logged
        at once. True if any was being warned about."""
        if not self._causes:  # the common case, every call, without the lock
            return False
        with self._lock:
            had, self._causes = bool(self._causes), {}
        return had
