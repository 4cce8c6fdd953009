"""A running process (worker or front) as its heartbeat row describes it."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from shared.platform import pid_alive


@dataclass(frozen=True)
class ProcessRow:
    """A worker's or a front's heartbeat row. `kind` is 'autostarted', 'manual' (workers) or
    the transport (fronts)."""

    id: str
    pid: int
    hostname: str
    kind: str
    started_time: float
    heartbeat_time: float
    stopping: bool = False
    endpoint: str | None = None

    def alive(self, alive_since: float) -> bool:
        return (not self.stopping and self.heartbeat_time >= alive_since
                and (self.hostname != socket.gethostname() or pid_alive(self.pid)))
