"""One `aokun run` per data_dir: data_dir/run.json names the running supervisor (its pid, the
front's MCP endpoint, the panel's URL once the panel printed it), so a second `aokun run` says
at once where the first one is, instead of starting a worker and failing on the front's port.

The record is written and checked under an OS file lock (data_dir/run.lock), removed when the
supervisor ends, and judged stale when its pid is gone or is no longer an `aokun run` (a pid
reused after a kill -9). The file may hold the panel's access token: it is created readable by
its owner only, in the folder that already holds the database.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from shared import platform

RECORD_NAME, LOCK_NAME = "run.json", "run.lock"


@dataclass
class RunRecord:
    pid: int
    started: float
    front: str
    panel: str

    def describe(self, data_dir: Path) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return (f"Aokun Memory is already running on {data_dir} (aokun run, pid {self.pid}, "
                f"since {since}):\n"
                f"  MCP endpoint:  {self.front}\n"
                f"  Web panel:     {self.panel}\n"
                f"Use that one, or stop it (Ctrl-C in its terminal, or kill {self.pid}) before "
                "starting another.")


def claim(data_dir: Path, front: str, panel: str) -> RunRecord | None:
    """Record this process as the data_dir's `aokun run`; or, when a live one is recorded
    already, change nothing and return its record."""
    platform.private_folder(data_dir)
    with platform.exclusive_file_lock(data_dir / LOCK_NAME):
        running = _live_record(data_dir)
        if running is not None and running.pid != os.getpid():
            return running
        _write(data_dir, RunRecord(os.getpid(), time.time(), front, panel))
    return None


def update_panel(data_dir: Path, panel: str) -> None:
    """The panel's URL with its token, once the panel has printed it."""
    with platform.exclusive_file_lock(data_dir / LOCK_NAME):
        record = _read(data_dir)
        if record is not None and record.pid == os.getpid():
            record.panel = panel
            _write(data_dir, record)


def release(data_dir: Path) -> None:
    """Remove this process's record (another's is left alone)."""
    with platform.exclusive_file_lock(data_dir / LOCK_NAME):
        record = _read(data_dir)
        if record is not None and record.pid == os.getpid():
            (data_dir / RECORD_NAME).unlink(missing_ok=True)


def _live_record(data_dir: Path) -> RunRecord | None:
    record = _read(data_dir)
    if record is None or not platform.pid_alive(record.pid):
        return None
    args = platform.command_line(record.pid)
    if args is not None and not _is_aokun_run(args):
        return None  # the pid now belongs to something else
    return record


def _is_aokun_run(args: list[str]) -> bool:
    return "run" in args and any("aokun" in arg for arg in args)


def _read(data_dir: Path) -> RunRecord | None:
    try:
        raw = json.loads((data_dir / RECORD_NAME).read_text(encoding="utf-8"))
        return RunRecord(int(raw["pid"]), float(raw["started"]), str(raw["front"]), str(raw["panel"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none, half-written or foreign: nothing to go by


def _write(data_dir: Path, record: RunRecord) -> None:
    path = data_dir / RECORD_NAME
    temp = path.with_name(f".{RECORD_NAME}.{os.getpid()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(asdict(record), handle)
    os.replace(temp, path)
