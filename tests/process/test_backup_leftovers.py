"""A backup killed while writing leaves no partial file behind for long: a real process is
killed (SIGKILL) in the middle of copying the database into <name>.db.partial; the next front
to start sweeps it away, as does the next backup. And a memory deleted after a backup is
reported as still held by that backup file (the delete receipt, through the MCP tool)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers import mcp_session, seed_memories, stdio_params, wait_for, write_config
from shared.assembly import open_services
from shared.config import load_config

# A worker's daily backup whose copy stops after its first step and waits there (on a real
# SQLite online backup, in its own process) until it is killed.
STALLED_BACKUP = textwrap.dedent("""
    import sqlite3, sys, time
    import shared.store.sqlite.backup as backup
    from shared.assembly import open_services
    from shared.config import load_config

    def stalled_copy(db, partial):
        target = sqlite3.connect(partial, isolation_level=None)
        def progress(status, remaining, total):
            print("copying", flush=True)
            time.sleep(3600)
        db.connection().backup(target, pages=1, progress=progress)

    backup._copy_into = stalled_copy
    services = open_services(load_config(sys.argv[1]), queued=False)
    services.lifecycle.backup(time.time(), "daily")
""")


def partials(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.partial")) if folder.is_dir() else []


def killed_during_backup(config: Path) -> list[Path]:
    """Start a backup in a child process, kill -9 it mid-copy; the partial files it left."""
    child = subprocess.Popen([sys.executable, "-c", STALLED_BACKUP, str(config)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()  # blocks until the copy has begun (or the child died)
        assert line.strip() == "copying", child.stderr.read()
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return partials(config.parent / "data" / "backups")


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
def test_a_backup_killed_while_writing_is_swept_at_the_next_start(tmp_path):
    config = write_config(tmp_path)
    seed_memories(config, "p", "Alice keeps bees on her roof", "Bob sings in a choir")
    left = killed_during_backup(config)
    assert [p.name.endswith("-daily.db.partial") for p in left] == [True]

    # The next front to start removes it (off the request path, at start-up).
    with mcp_session(stdio_params(config)) as session:
        session.ok("recall", {"query": "bees"})
        wait_for(lambda: not partials(tmp_path / "data" / "backups"), timeout=60,
                 what="the leftover partial backup to be swept")
    assert not list((tmp_path / "data" / "backups").glob("aokun-*.db"))  # nothing else made


def test_the_next_backup_sweeps_a_leftover_first(tmp_path):
    config = write_config(tmp_path)
    seed_memories(config, "p", "Alice keeps bees on her roof")
    left = killed_during_backup(config) if os.name == "posix" else []
    if not left:  # no kill here: a leftover as a killed backup leaves it
        folder = tmp_path / "data" / "backups"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "aokun-20240101-000000-000-daily.db.partial").write_bytes(b"SQLite format 3\0")
    services = open_services(load_config(config), queued=False)
    try:
        report = services.lifecycle.backup(time.time())
    finally:
        services.close()
    folder = tmp_path / "data" / "backups"
    assert partials(folder) == []
    assert [p.name for p in folder.iterdir() if p.name.startswith("aokun-")] == [Path(report["path"]).name]


def test_a_delete_names_the_backups_still_holding_the_memory(tmp_path):
    config = write_config(tmp_path, server={"exposed_tools": ["memorize", "delete_memory",
                                                              "memory_maintenance", "edit_memory"]})
    with mcp_session(stdio_params(config)) as session:
        kept = session.ok("memorize", {"content": "Alice's locker code is 4711"})["id"]
        later = session.ok("memorize", {"content": "Bob's bike is blue"})["id"]
        backup = Path(session.ok("memory_maintenance", {"action": "backup"})["changed"]["backup"]["path"])
        after = session.ok("memorize", {"content": "Carol moved to Lyon"})["id"]

        receipt = session.ok("delete_memory", {"id": kept})
        assert receipt["removed"]["documents"] == 1
        assert receipt["backups_holding"] == [backup.name]
        # A memory made after the backup is in none.
        assert session.ok("delete_memory", {"id": after})["backups_holding"] == []
        # Edited after the backup: the backup holds its earlier version, still it.
        session.ok("edit_memory", {"id": later, "content": "Bob's bike is red"})
        assert session.ok("delete_memory", {"id": later})["backups_holding"] == [backup.name]
    # The backup file was only read: unchanged, and no journal beside it.
    assert sorted(p.name for p in backup.parent.iterdir() if p.name.startswith("aokun-")) == [backup.name]
