"""What the processes that serve (the MCP front over HTTP, the panel) share: binding their
port early, stopping cleanly on a signal, one line for a failure to start, and an HTTP
front's note of where it listens, for `aokun hook` to find it without opening the store."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
from pathlib import Path

from shared import platform
from shared.config import StorageConfig
from shared.errors import ConfigError
from shared.store import face as store_face

# An HTTP front's note in data_dir of where it listens (announce_endpoint).
ENDPOINT_PREFIX, ENDPOINT_SUFFIX = "front-", ".endpoint"


def bind_listener(host: str, port: int, owner: str = "aokun-server",
                  choose: str = "--port or server.port") -> socket.socket:
    """A socket bound to host:port and listening, or ConfigError saying the port is taken.
    Bound here rather than by uvicorn so that a busy port is one line, found before the slow
    start-up, and so that "serving at" is only said of a port that is ours."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        platform.reuse_address(sock)  # rebind while old connections linger in TIME_WAIT
        sock.bind((host, port))
        sock.listen(2048)  # uvicorn's default backlog; connections wait here until it serves
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", None)):
            raise ConfigError(f"port {port} on {host} is in use (another {owner}?); choose "
                              f"another with {choose}") from exc
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; check "
                          "server.host and server.port (or --host and --port)") from exc
    return sock


def http_url(host: str, port: int) -> str:
    """Where a client reaches an MCP front bound to host:port (all interfaces: this machine)."""
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/mcp"


def interrupt_on_stop_signals() -> None:
    """uvicorn re-raises the stop signal it caught once it has shut down; as KeyboardInterrupt
    it reaches the `finally` that closes the front (its heartbeat row, its database),
    where SIGTERM's default action would end the process first."""
    for stop_signal in platform.graceful_stop_signals():
        signal.signal(stop_signal, signal.default_int_handler)


def describe_start_failure(exc: BaseException) -> str:
    """One line for a start-up failure; OSError's own text carries an '[Errno n]' prefix."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"cannot start: {exc.strerror}{where}"
    return str(exc)


def announce_endpoint(storage: StorageConfig, endpoint: str) -> Path:
    """Note in data_dir where this HTTP front listens and which store it serves. Its heartbeat
    row says the same, but reading that opens the store, which costs a prompt hook more than
    its whole answer; the note is a file read. Removed at a clean exit (withdraw_endpoint); one
    a killed front left names a dead process and is passed over."""
    path = storage.data_dir / f"{ENDPOINT_PREFIX}{os.getpid()}{ENDPOINT_SUFFIX}"
    note = {"endpoint": endpoint, "pid": os.getpid(), "host": socket.gethostname(),
            "store": store_face.address(storage)}
    temp = path.with_name(f".{path.name}.writing")
    temp.write_text(json.dumps(note), encoding="utf-8")
    temp.replace(path)
    return path


def withdraw_endpoint(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass  # gone already, or data_dir unwritable now: a dead pid's note is passed over


def announced_endpoints(storage: StorageConfig) -> list[str]:
    """The endpoints of the live HTTP fronts of this store on this machine that left a note in
    data_dir, newest first; [] when there is none (or data_dir cannot be read)."""
    found: list[tuple[float, str]] = []
    try:
        notes = [entry for entry in os.scandir(storage.data_dir)
                 if entry.name.startswith(ENDPOINT_PREFIX) and entry.name.endswith(ENDPOINT_SUFFIX)]
    except OSError:
        return []
    here, address = socket.gethostname(), store_face.address(storage)
    for entry in notes:
        try:
            note = json.loads(Path(entry.path).read_text(encoding="utf-8"))
            written = entry.stat().st_mtime
            pid = int(note["pid"])
            endpoint = str(note["endpoint"])
        except (OSError, ValueError, TypeError, KeyError):
            continue  # being replaced, or not ours
        if note.get("host") == here and note.get("store") == address and platform.pid_alive(pid):
            found.append((written, endpoint))
    return [endpoint for _, endpoint in sorted(found, reverse=True)]
