"""Every operating-system difference in one place: process liveness, signals, locks, detaching.

POSIX is the main target. Windows has no /proc, no flock, no SIGTERM to another process and
no directory fsync; each function below says what it does there instead. Nothing else in
shared/, aokun_server/, aokun_admin/, aokun_worker/ or aokun_panel/ calls fcntl, os.kill, signals other than
SIGINT/SIGTERM, /proc or process sessions directly.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

POSIX = os.name == "posix"
# Windows-only names (ctypes.windll, msvcrt.locking, signal.CTRL_BREAK_EVENT and SIGBREAK,
# subprocess's process-group flags) are used on Windows only; the stubs pyright reads here
# (Linux) lack them, hence the reportAttributeAccessIssue ignores where they appear.


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
    # A killed child not yet reaped by its parent still answers kill(0).
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return False  # gone between kill(0) and here
    except OSError:
        return True
    # No /proc (macOS): a zombie can only be told apart here if it is our own child, and then
    # reaping it is what its parent owes it anyway.
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return reaped == 0


def _windows_pid_alive(pid: int) -> bool:
    # os.kill(pid, 0) would terminate the process on Windows: ask the process table instead.
    import ctypes

    synchronize, still_active = 0x00100000 | 0x1000, 259
    kernel = ctypes.windll.kernel32  # pyright: ignore[reportAttributeAccessIssue]
    handle = kernel.OpenProcess(synchronize, False, pid)
    if not handle:
        return False
    try:
        code = ctypes.c_ulong()
        return bool(kernel.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == still_active
    finally:
        kernel.CloseHandle(handle)


def command_line(pid: int) -> list[str] | None:
    """The process's arguments, or None where they cannot be read (it is gone, or there is no
    /proc: macOS and Windows, where callers must not trust a pid file on its own)."""
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


def ask_child_to_stop(process: subprocess.Popen) -> None:
    """Ask a child started with own_group_popen_kwargs to stop gracefully: SIGTERM on POSIX;
    CTRL_BREAK_EVENT to its process group on Windows (uvicorn stops gracefully on it; a
    process that does not handle SIGBREAK ends at once)."""
    if process.poll() is not None:
        return
    try:
        process.send_signal(signal.SIGTERM if POSIX else signal.CTRL_BREAK_EVENT)  # pyright: ignore[reportAttributeAccessIssue]
    except (ProcessLookupError, OSError):
        pass  # it ended meanwhile


def own_group_popen_kwargs() -> dict:
    """Popen arguments for a supervised child in a process group of its own, so that the
    terminal's Ctrl-C reaches only the supervisor, which then stops each child once."""
    if POSIX:
        return {"start_new_session": True}
    return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # pyright: ignore[reportAttributeAccessIssue]


def stop_signals() -> tuple[signal.Signals, ...]:
    """What asks a supervisor to stop everything: Ctrl-C, SIGTERM (a service manager), a closed
    terminal (SIGHUP, POSIX only) and Ctrl-Break (Windows only)."""
    names = ("SIGINT", "SIGTERM", "SIGHUP") if POSIX else ("SIGINT", "SIGTERM", "SIGBREAK")
    return tuple(getattr(signal, name) for name in names if hasattr(signal, name))


def graceful_stop_signals() -> tuple[signal.Signals, ...]:
    """What another process can send to ask ours to stop gracefully: SIGTERM on POSIX, and on
    Windows also the CTRL_BREAK_EVENT that ask_child_to_stop sends (it arrives as SIGBREAK)."""
    return (signal.SIGTERM,) if POSIX else (signal.SIGTERM, signal.SIGBREAK)  # pyright: ignore[reportAttributeAccessIssue]


def fsync_directory(path: Path) -> None:
    """Make a rename inside `path` durable. POSIX fsyncs the folder; Windows cannot open a
    folder as a file, and NTFS journals the rename itself, so there it does nothing."""
    if not POSIX:
        return
    folder = os.open(path, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


# The mode of a file that holds memories (a backup, a restored database): its owner's only.
PRIVATE_FILE = 0o600


def private_folder(path: Path) -> None:
    """Create `path` (with any missing parents) readable by its owner only, and take group and
    others' access from it if it exists: it holds every memory (the store, its backups). A
    folder of another owner is left as it is. Windows folders inherit their ACLs: nothing is
    changed there."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not POSIX:
        return
    mode = path.stat().st_mode & 0o7777
    if mode & 0o077:
        try:
            os.chmod(path, mode & ~0o077)
        except PermissionError:
            pass


def reuse_address(sock) -> None:
    """Let a listening socket rebind while old connections linger in TIME_WAIT (POSIX, as
    uvicorn does). Windows' SO_REUSEADDR would let a second server share the port, so there
    the port is claimed exclusively instead."""
    import socket

    if POSIX:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    elif hasattr(socket, "SO_EXCLUSIVEADDRUSE"):
        # Windows only (hasattr above); the stubs of other platforms do not have it.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)  # pyright: ignore[reportAttributeAccessIssue]


def detached_popen_kwargs() -> dict:
    """Popen arguments for a child that outlives its parent and its parent's terminal."""
    if POSIX:
        return {"start_new_session": True}
    flags = subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP  # pyright: ignore[reportAttributeAccessIssue]
    return {"creationflags": flags}


@contextmanager
def exclusive_file_lock(path: Path) -> Iterator[None]:
    """Hold an OS lock on `path` (created if needed) for the block, waiting for other holders:
    flock on POSIX, a lock on the file's first byte with msvcrt on Windows. Either is released
    by the OS if the holder dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        if POSIX:
            import fcntl

            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
            return
        with _windows_byte_lock(handle.fileno()):
            yield


@contextmanager
def _windows_byte_lock(fd: int, poll_s: float = 0.05) -> Iterator[None]:
    import msvcrt
    import time

    os.lseek(fd, 0, os.SEEK_SET)  # msvcrt locks from the current position; "a" opened at the end
    while True:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # pyright: ignore[reportAttributeAccessIssue]
            break
        except OSError:
            time.sleep(poll_s)  # LK_LOCK would give up after 10 s; wait as flock does
    try:
        yield
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # pyright: ignore[reportAttributeAccessIssue]
