"""Forgetting, sweeps, backups and maintenance, with time injected (nothing waits)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from aokun_server.app import build_front
from helpers import mcp_session, memory_service, store_sql, wait_for, write_config
from shared.assembly import open_services
from shared.config import load_config
from shared.lifecycle import Lifecycle, decay_boundaries
from shared.memories import MemoryService
from shared.store import open_store
from shared.store.model.documents import MemoryFields
from shared.store.model.graph import EdgeSpec, EntrySpec, MemoryGraph, NodeSpec
from shared.units import DAY

BIN = Path(sys.executable).parent
T0 = 1_700_000_000.0  # 2023-11-14 22:13 UTC


@pytest.fixture
def life(tmp_path):
    config = load_config(write_config(tmp_path, forgetting={"decay_rate": 0.05}))
    services = open_services(config, queued=False)
    # The parts Services builds, with the clock at T0 (nothing waits).
    store = MemoryService(services.store, services.segmenter, None, services.live, clock=lambda: T0)
    yield Lifecycle(services.live, store), store
    services.close()


def importance(store, memory_id):
    return store.store.documents.get(memory_id).fields.importance


def expected_after(days, importance_0, accesses, rate=0.05, multiplier=0.5):
    for _ in range(days):
        rate_eff = rate * max(0.3, 1 - 0.1 * min(accesses, 10))
        importance_0 = max(0.05, importance_0 * (1 - rate_eff))
        accesses *= multiplier
    return importance_0


def test_thirty_days_of_decay_follow_the_formula(life):
    lifecycle, store = life
    plain = store.memorize("plain memory", MemoryFields(importance=0.8)).id
    used = store.memorize("often recalled memory", MemoryFields(importance=0.8)).id
    pinned = store.memorize("pinned memory", MemoryFields(importance=0.8, pinned=True)).id
    store.touch([used] * 1, T0)
    store_sql(store.store, "UPDATE documents SET access_count = 6 WHERE id = ?", (used,))
    assert lifecycle.decay(T0) == {"days": 0, "memories": 0}  # starts counting
    for day in range(1, 31):
        report = lifecycle.decay(T0 + day * DAY)
        assert report["days"] == 1
    assert importance(store, plain) == pytest.approx(expected_after(30, 0.8, 0))
    assert importance(store, used) == pytest.approx(expected_after(30, 0.8, 6))
    assert importance(store, used) > importance(store, plain)  # recalled facts fade slower
    assert importance(store, pinned) == 0.8


def test_catch_up_after_a_five_day_gap(life):
    lifecycle, store = life
    mid = store.memorize("memory", MemoryFields(importance=0.6)).id
    lifecycle.decay(T0)
    report = lifecycle.decay(T0 + 5 * DAY + 60)
    assert report["days"] == 5
    assert importance(store, mid) == pytest.approx(expected_after(5, 0.6, 0))
    assert lifecycle.decay(T0 + 5 * DAY + 120)["days"] == 0  # nothing due twice


def test_decay_boundaries_are_daily_at_the_configured_time():
    day0 = 1_700_006_400.0  # 2023-11-15 00:00 UTC
    assert decay_boundaries(day0, day0 + 3 * DAY, 0, 5) == [day0 + 300 + i * DAY for i in range(3)]


def test_archival_and_include_archived(tmp_path):
    config_path = write_config(tmp_path, forgetting={"cleanup_days_threshold": 10,
                                                     "cleanup_importance_threshold": 0.3})
    front = build_front(load_config(config_path))
    with mcp_session(front.server) as s:
        old = s.ok("memorize", {"content": "an old trivial note about socks", "metadata": {"importance": 0.1}})["id"]
        keep = s.ok("memorize", {"content": "an old important note about socks", "metadata": {"importance": 0.9}})["id"]
        lifecycle = front.services.lifecycle
        assert lifecycle.archive(time.time() + 11 * DAY)["archived"] == 1
        assert [r["id"] for r in s.ok("recall", {"query": "socks"})["results"]] == [keep]
        both = s.ok("recall", {"query": "socks", "include_archived": True})["results"]
        assert {r["id"] for r in both} == {old, keep}
        assert s.ok("list_memories")["total"] == 2  # archived, never deleted


def test_an_atom_walks_to_purged_with_its_graph_output(life):
    lifecycle, store = life
    doc = store.memorize("I have a dentist appointment tomorrow", MemoryFields())
    from shared.atom_life import store_atoms
    from shared.store.model.atoms import AtomOwner, AtomRow

    owner = AtomOwner(doc.id, None, None, 0.5, doc.content_hash)
    text = "I have a dentist appointment tomorrow"
    fact = NodeSpec("fact", text, text.lower())
    with store.store.write() as tx:
        store_atoms(tx, owner, [AtomRow(
            "planned", text, "dentist appoint tomorrow", 0.8, deadline=T0 + DAY, ttl_days=2.0)],
            lambda *a: 2.0, 0.6, T0)
        (atom_id,) = [row["id"] for row in tx.atoms.of_memory(doc.id)]
        tx.graph.replace_for_memory(doc.id, None, MemoryGraph(
            [fact], [EdgeSpec(NodeSpec("topic", "dentist", "dentist"), fact, "describes", 0.8)],
            [EntrySpec(f"Fact: {text}", "dentist appoint tomorrow", fact, 0.8, atom_id)]), "h", T0)
    state = lambda: store.store.atoms.of_memory(doc.id)[0]["state"]  # noqa: E731
    assert lifecycle.sweep_atoms(T0 + DAY / 2)["expired"] == 0 and state() == "active"
    assert lifecycle.sweep_atoms(T0 + 2 * DAY)["expired"] == 1 and state() == "expired"
    report = lifecycle.sweep_atoms(T0 + 10 * DAY)
    assert report["forgotten"] == 1 and state() == "forgotten"
    assert store_sql(store.store, "SELECT COUNT(*) FROM atoms_fts")[0][0] == 0
    report = lifecycle.sweep_atoms(T0 + 41 * DAY)
    assert (report["purged"], report["graph_entries"], report["graph_edges"]) == (1, 1, 1)
    assert state() == "purged"  # the row is kept
    assert store.store.graph.table_counts()["graph_nodes"] == 0


@pytest.mark.slow
def test_backup_during_writes_restores_into_a_fresh_data_dir(tmp_path):
    (tmp_path / "a").mkdir()
    config_path = write_config(tmp_path / "a", server={"exposed_tools": ["memorize", "memory_maintenance"]})
    front = build_front(load_config(config_path))
    stop = threading.Event()
    written = []

    store = memory_service(open_store(front.live.at_start.storage), front.live.at_start.text)
    store.segmenter.warm_up()

    def writer():
        while not stop.is_set():
            written.append(store.memorize(f"concurrent note {len(written)} about gardening", MemoryFields()).id)

    with mcp_session(front.server) as s:
        s.ok("memorize", {"content": "the boiler code is 4711"})
        thread = threading.Thread(target=writer)
        thread.start()
        wait_for(lambda: len(written) > 5, 60, 0.01, "writes under way")
        path = s.ok("memory_maintenance", {"action": "backup"})["changed"]["backup"]["path"]
        after_backup = len(written)
        wait_for(lambda: len(written) > after_backup + 5, 60, 0.01, "writes going on after the backup")
        stop.set()
        thread.join()
    assert len(written) > 10
    fresh = tmp_path / "b"
    fresh.mkdir()
    restored_config = write_config(fresh)
    run = subprocess.run([BIN / "aokun", "restore", path, "--config", restored_config],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    with mcp_session(build_front(load_config(restored_config)).server) as s:
        assert "4711" in s.ok("recall", {"query": "boiler code"})["results"][0]["text"]


def test_restore_refuses_a_corrupt_file_and_a_running_worker(tmp_path):
    config_path = write_config(tmp_path)
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x13" * 5000)
    run = subprocess.run([BIN / "aokun", "restore", bad, "--config", config_path],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "refusing to restore" in run.stderr
    backup = subprocess.run([BIN / "aokun", "backup", "--config", config_path],
                            capture_output=True, text=True, timeout=60)
    assert backup.returncode == 0
    path = backup.stdout.strip().splitlines()[-1]
    assert Path(path).is_file() and Path(path).parent == tmp_path / "data" / "backups"
    store = open_store(load_config(config_path).storage)
    import os
    import socket

    with store.write() as tx:
        tx.runtime.beat("live", os.getpid(), socket.gethostname(), time.time())
    store.close()
    run = subprocess.run([BIN / "aokun", "restore", path, "--config", config_path],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "worker is running" in run.stderr


def run_stages(worker) -> None:
    """Every waiting stage, by the worker's own runner in this process."""
    from shared.store.model.stages import STAGES

    try:
        for stage in STAGES:
            while worker.runner.run_next(stage)[0]:
                pass
    finally:
        worker.services.close()


@pytest.mark.slow
def test_doctor_and_repair_on_rows_removed_from_each_table(tmp_path):
    import sqlite3

    from aokun_worker.service import WorkerService
    from fake_openai import FakeEmbeddingsServer
    from helpers import all_processed, db_rows

    with FakeEmbeddingsServer(dim=16) as api:
        config = write_config(tmp_path, embedding={"provider": "openai", "base_url": api.base_url,
                                                   "model": "fake", "dimensions": 16},
                              server={"exposed_tools": ["memorize"]})
        front = build_front(load_config(config))
        try:
            with mcp_session(front.server) as s:
                facts = ["Alice grows tomatoes on the balcony", "Bob repaired the old bicycle",
                         "Carol learned to play the cello", "Dave adopted a grey kitten",
                         "Erin moved to a flat near the river", "Frank bakes sourdough every Sunday"]
                ids = [s.ok("memorize", {"content": fact})["id"] for fact in facts]
        finally:
            front.close()
        run_stages(WorkerService(open_services(load_config(config), queued=False)))
        assert all_processed(config, 6)
        assert _aokun(config, "doctor").returncode == 0
        conn = sqlite3.connect(tmp_path / "data" / "aokun.db")
        with conn:
            conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (ids[0],))
            conn.execute("DELETE FROM vectors WHERE kind = 'document' AND owner_id = ?", (ids[1],))
            conn.execute("DELETE FROM atoms_fts WHERE rowid IN (SELECT id FROM memory_atoms WHERE memory_id = ?)",
                         (ids[2],))
            conn.execute("DELETE FROM memory_atoms WHERE memory_id = ?", (ids[3],))
            conn.execute("DELETE FROM graph_entries WHERE source_memory_id = ?", (ids[4],))
            conn.execute("DELETE FROM memory_stages WHERE memory_id = ?", (ids[5],))
        conn.close()
        doctor = _aokun(config, "doctor")
        assert doctor.returncode == 1
        for text in ("BM25 rows", "lack vectors", "lack atom search rows", "lack atoms", "lack graph entries",
                     "lack stage rows"):
            assert text in doctor.stdout, (text, doctor.stdout)
        assert "run with --apply" in _aokun(config, "repair").stdout
        assert _aokun(config, "repair", "--apply").returncode == 0
        # A worker back-fills BM25 as it opens (WorkerService.open), then redoes the stages.
        run_stages(WorkerService.open(load_config(config)))
        assert db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE status != 'done'") == [(0,)]
        doctor = _aokun(config, "doctor")
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr


def _aokun(config, *args):
    return subprocess.run([BIN / "aokun", *map(str, args), "--config", config], capture_output=True,
                          text=True, timeout=120)


def test_memory_maintenance_tool_and_cli(tmp_path):
    config_path = write_config(tmp_path, server={"exposed_tools": ["memorize", "memory_maintenance"]})
    front = build_front(load_config(config_path))
    with mcp_session(front.server) as s:
        s.ok("memorize", {"content": "something to keep"})
        report = s.ok("memory_maintenance", {"action": "all"})["changed"]
        assert set(report) == {"decay", "archive", "atoms", "backup", "reconcile"}
        assert Path(report["backup"]["path"]).is_file()
        assert "action" in s.error("memory_maintenance", {"action": "defragment"})
    run = _aokun(config_path, "maintenance", "atoms")
    assert run.returncode == 0 and '"expired": 0' in run.stdout


def test_backups_in_one_millisecond_get_their_own_files_and_leave_nothing_else(tmp_path):
    from shared.store.backup import LOCK_NAME
    from shared.store.sqlite.backup import integrity

    store = open_store(load_config(write_config(tmp_path)).storage)
    directory = tmp_path / "backups"
    try:
        paths = [store.backup(directory, T0, "manual") for _ in range(3)]
    finally:
        store.close()
    assert len(set(paths)) == 3
    # Besides the backups, only the lock every backup of the folder takes (shared/store/backup.py).
    assert sorted(p.name for p in directory.iterdir()) == sorted([LOCK_NAME, *(p.name for p in paths)])
    assert all(integrity(p) == (True, "ok") for p in paths)
    # checks leave nothing
    assert sorted(p.name for p in directory.iterdir()) == sorted([LOCK_NAME, *(p.name for p in paths)])


def test_a_failed_backup_leaves_no_files(tmp_path):
    import sqlite3

    from shared.errors import StorageError
    from shared.store.backup import LOCK_NAME

    storage = load_config(write_config(tmp_path)).storage
    open_store(storage).close()
    conn = sqlite3.connect(storage.db_path)
    with conn:  # pages enough to damage a third of them
        conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [(f"k{i}", "x" * 3000) for i in range(200)])
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    with open(storage.db_path, "r+b") as handle:  # garbage over the last third of the pages
        handle.seek(page_size * (pages * 2 // 3))
        handle.write(b"\x17" * page_size * (pages // 3))
    damaged = open_store(storage, migrate=False)
    directory = tmp_path / "backups"
    try:
        with pytest.raises(StorageError):
            damaged.backup(directory, T0, "manual")
    finally:
        damaged.close()
    assert [p.name for p in directory.iterdir()] == [LOCK_NAME]  # the lock only: no partial file


def test_a_restored_store_has_no_worker_or_front_rows(tmp_path):
    import os
    import socket

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    source = write_config(tmp_path / "a")
    store = open_store(load_config(source).storage)
    with store.write() as tx:
        # Rows of processes that ran on the source store (this pid: they would pass for live).
        tx.runtime.beat("source-worker", os.getpid(), socket.gethostname(), time.time())
        tx.runtime.front_beat("source-front", os.getpid(), socket.gethostname(), "stdio", time.time())
    store.close()
    backup = subprocess.run([BIN / "aokun", "backup", "--config", source], capture_output=True, text=True, timeout=60)
    assert backup.returncode == 0, backup.stderr
    target = write_config(tmp_path / "b")
    path = backup.stdout.strip().splitlines()[-1]
    run = subprocess.run([BIN / "aokun", "restore", path, "--config", target],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    restored = open_store(load_config(target).storage)
    try:
        assert restored.runtime.worker_rows() == [] and restored.runtime.front_rows() == []
    finally:
        restored.close()
    # The backup itself is untouched: it still holds the source's rows.
    import sqlite3

    kept = sqlite3.connect(path)
    assert kept.execute("SELECT COUNT(*) FROM workers").fetchone()[0] == 1
    kept.close()
