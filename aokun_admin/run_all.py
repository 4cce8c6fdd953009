"""`aokun run`: the MCP front over HTTP, a worker and the web panel, supervised in one
process on any platform (what `honcho start` does with the Procfile, without bash or honcho).

Each child runs in a process group of its own, so a Ctrl-C reaches only this supervisor, which
asks every child to stop once (shared.platform.ask_child_to_stop: SIGTERM, graceful for all
three) and waits for them; a second Ctrl-C, or `--stop-timeout` running out, kills what is
left (the stage rows make that safe). A child that dies by itself is reported and the others
are stopped, as honcho does: restarting it would hide a crash, and would loop on a failure
that repeats at every start (a busy port, a bad config); run under a service manager for
restarts. Every line a child prints is shown with its name in front.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TextIO

from aokun_admin import run_record
from aokun_admin.mcp_config import http_url, server_command
from shared import platform

PANEL_PORT = 8765
STOP_TIMEOUT_S = 30.0
POLL_S = 0.1
NAME_WIDTH = 6
PANEL_LINE = re.compile(r"aokun panel: (http://127\.0\.0\.1:\d+/\?token=\S+)")


def add_parser(commands, with_config: Callable) -> argparse.ArgumentParser:
    """The `run` subcommand on the admin CLI's subparsers."""
    parser = with_config(commands.add_parser(
        "run", help="run the MCP front over HTTP, a worker and the web panel (Ctrl-C stops all)"))
    parser.add_argument("--panel-port", type=int, default=PANEL_PORT,
                        help=f"the panel's port on 127.0.0.1 (default {PANEL_PORT})")
    parser.add_argument("--stop-timeout", type=float, default=STOP_TIMEOUT_S,
                        help="seconds to let the children stop gracefully before killing them "
                             f"(default {STOP_TIMEOUT_S:.0f})")
    return parser


def cmd_run(admin, args) -> int:
    """Start the three children, print where to reach them, and supervise until told to stop
    or one of them ends. 0 after a requested stop; otherwise the failing child's status."""
    config = admin.config
    source = Path(config.source).resolve() if config.source is not None else None
    data_dir = config.storage.data_dir
    try:  # before anything starts: a second run on this data_dir says where the first one is
        running = run_record.claim(data_dir, http_url(config.server.host, config.server.port),
                                   f"http://127.0.0.1:{args.panel_port}/ (its link with the access "
                                   "token is in that run's output)")
    except OSError as exc:
        print(f"aokun run: cannot use {data_dir}: {exc}", file=sys.stderr)
        return 2
    if running is not None:
        print(f"aokun run: {running.describe(data_dir)}", file=sys.stderr)
        return 1
    try:
        out = _line_stream(sys.stdout)
        out.write(startup_text(config.server.host, config.server.port, source, args.panel_port))
        out.flush()
        supervisor = Supervisor(children(source, args.panel_port), out, args.stop_timeout,
                                on_line=partial(_record_panel_url, data_dir))
        return supervisor.run()
    finally:
        run_record.release(data_dir)


def _record_panel_url(data_dir: Path, name: str, line: str) -> None:
    found = name == "panel" and PANEL_LINE.search(line)
    if found:
        try:
            run_record.update_panel(data_dir, found.group(1))
        except OSError:
            pass  # the record keeps the panel's address without its token


def children(config: Path | None, panel_port: int) -> list[tuple[str, list[str]]]:
    """(name, command) of each child: this interpreter running each entry point as a module,
    so nothing depends on where the console scripts were installed."""
    given = ["--config", str(config)] if config is not None else []
    python = sys.executable
    return [("front", [python, "-m", "aokun_server.main", *given, "--transport", "http"]),
            ("worker", [python, "-m", "aokun_worker.main", *given]),
            ("panel", [python, "-m", "aokun_panel.main", *given, "--port", str(panel_port),
                       "--no-browser"])]


def startup_text(host: str, port: int, config: Path | None, panel_port: int) -> str:
    server = " ".join(map(str, stdio_command(config)))
    return (
        "Aokun Memory is starting (front over HTTP, a worker, the web panel).\n"
        f"  MCP endpoint:  {http_url(host, port)}\n"
        f"  stdio command: {server}\n"
        f'  Web panel:     the link on the "panel  | aokun panel: http://127.0.0.1:{panel_port}/?token=..." line\n'
        "                 below (a new access token at every start; 127.0.0.1 only)\n"
        "Stop with Ctrl-C.\n")


def stdio_command(config: Path | None) -> list[str]:
    """The command line a host launches for stdio, as `aokun mcp-config` writes it."""
    command, args = server_command()
    return [command, *args] + (["--config", str(config)] if config is not None else [])


@dataclass
class Child:
    name: str
    command: list[str]
    process: subprocess.Popen[str] | None = None
    pump: threading.Thread | None = None

    @property
    def started(self) -> subprocess.Popen[str]:
        """The process of a started child (those Supervisor._started lists)."""
        if self.process is None:
            raise RuntimeError(f"{self.name} was not started")
        return self.process


class Supervisor:
    """Starts children, prefixes their output, and stops them all together."""

    def __init__(self, commands: list[tuple[str, list[str]]], out: TextIO,
                 stop_timeout_s: float = STOP_TIMEOUT_S,
                 on_line: Callable[[str, str], None] | None = None):
        self.children = [Child(name, command) for name, command in commands]
        self._on_line = on_line
        self._out = out
        self._out_lock = threading.Lock()
        self._stop_timeout_s = stop_timeout_s
        self._stop = threading.Event()
        self._kill = threading.Event()
        self._signal: int | None = None

    def run(self) -> int:
        previous = self._install_handlers()
        try:
            try:
                self._start_all()
            except OSError as exc:
                self.say(f"cannot start {self.children[len(self._started())].name}: {exc}")
                return self._stop_all(None) or 1
            return self._stop_all(self._watch())
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def say(self, text: str, name: str = "run") -> None:
        with self._out_lock:
            self._out.write(f"{name:<{NAME_WIDTH}} | {text}\n")
            self._out.flush()

    def _install_handlers(self) -> dict:
        previous = {}
        for signum in platform.stop_signals():
            previous[signum] = signal.signal(signum, self._on_signal)
        return previous

    def _on_signal(self, signum, frame) -> None:
        if self._stop.is_set():
            self._kill.set()  # asked twice: do not wait for graceful stops
        self._signal = signum
        self._stop.set()

    def _start_all(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8"}
        for child in self.children:
            if self._stop.is_set():
                return
            child.process = subprocess.Popen(
                child.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, env=env, encoding="utf-8", errors="replace",
                **platform.own_group_popen_kwargs())
            child.pump = threading.Thread(target=self._pump, args=(child,), name=f"pump-{child.name}",
                                          daemon=True)
            child.pump.start()
            self.say(f"{child.name} started (pid {child.process.pid})")

    def _pump(self, child: Child) -> None:
        output = child.started.stdout
        assert output is not None  # started with stdout=PIPE
        for line in output:
            line = line.rstrip("\r\n")
            self.say(line, child.name)
            if self._on_line is not None:
                self._on_line(child.name, line)

    def _watch(self) -> Child | None:
        """Wait for a stop request or a child's end; return the child that ended, if any."""
        while not self._stop.wait(POLL_S):
            for child in self._started():
                if child.started.poll() is not None:
                    self.say(f"{child.name} exited with status {child.started.returncode}; "
                             "stopping the others")
                    return child
        name = signal.Signals(self._signal).name if self._signal is not None else "a signal"
        self.say(f"{name} received; stopping (again to kill at once)")
        return None

    def _stop_all(self, failed: Child | None) -> int:
        running = [c for c in self._started() if c.started.poll() is None]
        for child in running:
            platform.ask_child_to_stop(child.started)
        deadline = time.monotonic() + self._stop_timeout_s
        while running and time.monotonic() < deadline and not self._kill.is_set():
            time.sleep(POLL_S)
            running = [c for c in running if c.started.poll() is None]
        for child in running:
            child.started.kill()
            self.say(f"{child.name} killed (it had not stopped)")
        for child in self._started():
            child.started.wait()
            if child.pump is not None:  # set with the process
                child.pump.join(timeout=5)
            if child is not failed and child not in running:
                code = child.started.returncode
                self.say(f"{child.name} stopped" + ("" if _stopped_as_asked(code) else f" (status {code})"))
        if failed is not None:
            return exit_status(failed.started.returncode)
        return 1 if running else 0

    def _started(self) -> list[Child]:
        return [c for c in self.children if c.process is not None]


def _stopped_as_asked(returncode: int) -> bool:
    # Front and panel turn SIGTERM into a clean exit (0) once started; a child signalled
    # while still importing ends by the signal itself: status -SIGTERM.
    return returncode == 0 or (platform.POSIX and returncode == -signal.SIGTERM)


def exit_status(returncode: int) -> int:
    """A child's end as this process's exit status: never 0 (it was not asked to stop), and a
    signal as a shell reports it (128 + its number)."""
    if returncode > 0:
        return returncode
    return 128 - returncode if returncode < 0 else 1


def _line_stream(stream: TextIO) -> TextIO:
    # Children's text may be Chinese; a console or file in a legacy encoding must not stop us.
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="replace", line_buffering=True)
    return stream
