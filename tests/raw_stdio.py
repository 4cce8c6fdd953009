"""aokun-server over stdio spoken to raw, line by line, without any client library: for
lines no client would send (unreadable, malformed)."""

from __future__ import annotations

import json
import queue
import subprocess
import threading

from helpers import BIN

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw-test", "version": "0"}}}


class RawStdio:
    """One aokun-server process on stdio: a line sent, a reply read (each with a deadline)."""

    def __init__(self, config_path):
        self.proc = subprocess.Popen([str(BIN / "aokun-server"), "--config", str(config_path)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, raw: bytes | dict) -> None:
        if isinstance(raw, dict):
            raw = json.dumps(raw).encode()
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 60) -> dict:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no reply within {timeout:.0f} s") from None
        assert line, "the server closed stdout"
        return json.loads(line)

    def close(self) -> int:
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
