"""Worker pid files in data_dir: a worker writes its own, `aokun status` and `aokun stop` read
them to find this data_dir's workers that have no fresh heartbeat row."""

from __future__ import annotations

import os
from pathlib import Path


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
