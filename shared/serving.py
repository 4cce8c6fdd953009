"""What the processes that serve (the MCP front over HTTP, the panel) share: binding their
port early, stopping cleanly on a signal, and one line for a failure to start."""

from __future__ import annotations

import errno
import signal
import socket

from shared import platform
from shared.errors import ConfigError


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
