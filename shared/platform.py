"""Every operating-system difference in one place: process liveness, signals, locks, detaching.

POSIX is the main target. On Windows there is no /proc, no flock and no graceful signal to
another process, so the fallbacks below are weaker, and each says how.
"""

from __future__ import annotations

import os
import signal
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

POSIX = os.name == "posix"


def pid_alive(pid: int) -> bool:
    """True if a process with this pid exists and is not a zombie."""
    if not POSIX:
        return _windows_pid_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    # A killed child not yet reaped by its parent still answers kill(0) on Linux.
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return True


def _windows_pid_alive(pid: int) -> bool:
    # os.kill(pid, 0) would terminate the process on Windows: ask the process table instead.
    import ctypes

    synchronize, still_active = 0x00100000 | 0x1000, 259
    kernel = ctypes.windll.kernel32  # type: ignore[attr-defined]
    handle = kernel.OpenProcess(synchronize, False, pid)
    if not handle:
        return False
    try:
        code = ctypes.c_ulong()
        return bool(kernel.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == still_active
    finally:
        kernel.CloseHandle(handle)


def command_line(pid: int) -> list[str] | None:
    """The process's arguments, or None where they cannot be read (no /proc, or it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def terminate(pid: int) -> bool:
    """Ask a process to stop: SIGTERM on POSIX (graceful for aokun-worker). Windows has no
    graceful signal to another process, so there it is ended at once (stage rows make that
    safe). False if it was already gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, OSError):
        return False
    return True


def detached_popen_kwargs() -> dict:
    """Popen arguments for a child that outlives its parent and its parent's terminal."""
    if POSIX:
        return {"start_new_session": True}
    flags = subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
    return {"creationflags": flags}


@contextmanager
def exclusive_file_lock(path: Path) -> Iterator[None]:
    """Hold an OS lock on `path` (created if needed) for the block, waiting for other holders.

    Windows fallback: no lock at all, so two processes may both enter; callers must only use
    it where that is harmless."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        if not POSIX:
            yield
            return
        import fcntl

        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
