"""`aokun run` under test: its supervisor started with its output collected, the lines it
prints when a child starts and when the panel is up, and whether processes are gone."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from helpers import wait_for
from shared.platform import pid_alive

STARTED = re.compile(r"^run +\| (\w+) started \(pid (\d+)\)$")
PANEL_URL = re.compile(r"^panel +\| aokun panel: (http://127\.0\.0\.1:\d+/\?token=[\w-]+)$")


class Run:
    """`aokun run` (python -m aokun_admin.main run) with its output collected. As a context
    manager, it leaves nothing running whatever the test's outcome: at the end the supervisor
    and every child it said it started (each the leader of a process group of its own) are
    killed, with their groups, if still there."""

    def __init__(self, command: list[str], cwd: Path):
        self.lines: list[str] = []
        self.proc = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, encoding="utf-8", errors="replace")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def aokun_run(cls, config: Path, panel_port: int, *extra: str) -> Run:
        return cls([sys.executable, "-m", "aokun_admin.main", "run", "--config", str(config),
                    "--panel-port", str(panel_port), *extra], config.parent)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *failure) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for match in map(STARTED.match, list(self.lines)):
            if match and pid_alive(int(match.group(2))):
                try:
                    os.killpg(int(match.group(2)), signal.SIGKILL)
                except ProcessLookupError:
                    pass  # gone since

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def line(self, pattern: re.Pattern, timeout: float = 60.0) -> re.Match:
        def found():
            if self.proc.poll() is not None and not self._reader.is_alive():
                raise AssertionError(f"aokun run ended ({self.proc.returncode}):\n{self.text()}")
            return next((m for m in map(pattern.search, list(self.lines)) if m), None)
        return wait_for(found, timeout=timeout, what=f"{pattern.pattern!r} in:\n{self.text()}")

    def children(self) -> dict[str, int]:
        self.line(re.compile(r"^run +\| panel started"))
        return {m.group(1): int(m.group(2)) for m in map(STARTED.match, list(self.lines)) if m}

    def finish(self, timeout: float = 60.0) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=10)
        return code


def all_gone(pids) -> bool:
    return not any(pid_alive(pid) for pid in pids)
