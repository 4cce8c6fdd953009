"""aokun-worker starts, announces itself with a heartbeat, and stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers import db_rows, wait_for, write_config
from shared.config import load_config
from shared.queue import open_queue
from shared.tasks import Enqueuer

BIN = Path(sys.executable).parent


def test_worker_starts_and_stops_gracefully_on_sigterm(tmp_path):
    config = write_config(tmp_path)
    queue = Enqueuer(open_queue(load_config(config).storage))
    queue.drain("embed")  # a message for the consumer's threads to take (nothing to embed)
    proc = subprocess.Popen([BIN / "aokun-worker", "--config", config],
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "data" / "aokun.db").exists() or not db_rows(
                config, "SELECT pid FROM workers"):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "no heartbeat within 30 s"
            time.sleep(0.1)
        assert db_rows(config, "SELECT pid FROM workers") == [(proc.pid,)]
        assert (tmp_path / "data" / "queue.db").exists()
        # Huey's graceful shutdown is what is under test: signal once its consumer runs (a
        # SIGTERM earlier than that stops the worker before it consumes, without that line).
        while not any("Huey consumer started" in line for line in lines):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "the consumer did not start within 30 s"
            time.sleep(0.05)
        # Huey logs that line before it starts its threads and then sets its own signal
        # handlers: a SIGTERM in between meets the worker's pre-consume handler instead (a clean
        # stop, but not the path under test). A message its threads took comes after that.
        wait_for(lambda: queue.pending_count() == 0, 30, 0.02, what="the consumer's threads taking a message")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        reader.join(timeout=5)
        err = "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Shutting down gracefully" in err
    assert db_rows(config, "SELECT COUNT(*) FROM workers") == [(0,)]
