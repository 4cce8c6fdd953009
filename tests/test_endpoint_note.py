"""An HTTP front's note in data_dir (shared/serving.py), by which `aokun hook` finds it without
opening the store: a live front of this store is found, newest first; a note a killed front
left (its process gone), one of another store sharing the folder, and a damaged one are passed
over; a clean exit withdraws it. The real front writes and withdraws it (test_hook.py's front
tests find it through the real CLI)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

from shared.config import StorageConfig
from shared.serving import announce_endpoint, announced_endpoints, withdraw_endpoint
from shared.store.face import address as store_address


def test_live_notes_of_this_store_are_found_and_others_passed_over(tmp_path):
    storage = StorageConfig(data_dir=tmp_path)
    assert announced_endpoints(storage) == []
    note = announce_endpoint(storage, "http://127.0.0.1:8123/mcp")
    assert announced_endpoints(storage) == ["http://127.0.0.1:8123/mcp"]

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = json.loads(note.read_text(encoding="utf-8")) | {"pid": int(gone.stdout), "endpoint": "http://x:1/mcp"}
    (tmp_path / f"front-{gone.stdout.strip()}.endpoint").write_text(json.dumps(dead), encoding="utf-8")
    other = dataclasses.replace(storage, backend="postgresql", url="postgresql://db.example/aokun")
    assert store_address(other) == "postgresql://db.example:5432/aokun"
    foreign = json.loads(note.read_text(encoding="utf-8")) | {"store": store_address(other),
                                                               "endpoint": "http://y:2/mcp"}
    (tmp_path / "front-1.endpoint").write_text(json.dumps(foreign), encoding="utf-8")
    (tmp_path / "front-2.endpoint").write_text("{not json", encoding="utf-8")
    assert announced_endpoints(storage) == ["http://127.0.0.1:8123/mcp"]
    assert announced_endpoints(other) == ["http://y:2/mcp"], "each store finds its own front only"

    withdraw_endpoint(note)
    assert not note.exists() and announced_endpoints(storage) == []
    withdraw_endpoint(note)  # twice: nothing to do
    assert announced_endpoints(StorageConfig(data_dir=tmp_path / "missing")) == []
