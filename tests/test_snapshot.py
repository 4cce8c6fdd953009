"""FAISS snapshots: a front (built in this process, as aokun-server builds it) starts from the
snapshot and the vector changes since and recalls exactly as a front that built its index from
SQLite; a snapshot newer than the database, one from before a restore, or a damaged one is
refused with one log line. The stages a worker would run are run here by the worker's own
runner, `aokun backup` and `restore` by their main() (tests/process/test_snapshot_worker.py: a
real worker process writes the snapshot once vector writes settle)."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from aokun_worker.periodic import SettleWatch
from helpers import (
    all_processed,
    aokun_in_process,
    db_rows,
    front_in_process,
    run_every_stage,
    write_config,
)
from shared.config import StorageConfig
from shared.search import snapshot
from shared.search.vectors import VectorIndex
from shared.store import open_store
from shared.store.model.vectors import KINDS
from snapshot_fronts import (
    SETTINGS,
    TEXTS,
    WITH_INFO,
    data_dir,
    front,
    front_log,
    loaded_from_snapshot,
    snapshot_lines,
    vector_seq,
)

QUERIES = ["kitten", "where does my sister live", "喝茶", "support group", "travel plans in spring",
           "who kept honey bees by the sea"]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory) -> Path:
    """A store whose memories the worker's stages embedded (documents and graph entries)."""
    folder = tmp_path_factory.mktemp("embedded")
    config = write_config(folder, **SETTINGS)
    with front_in_process(config) as s:
        for text in TEXTS:
            s.ok("memorize", {"content": text})
    run_every_stage(config)
    assert all_processed(config, len(TEXTS))
    return folder


@pytest.fixture
def store(embedded, tmp_path) -> Path:
    """A copy of the embedded store (a new database file: snapshots made from the original
    would be refused here, so none is copied); returns its config."""
    shutil.copytree(embedded / "data", tmp_path / "data", ignore=shutil.ignore_patterns("*.snapshot*", "queue*"))
    return write_config(tmp_path, **SETTINGS)


def vector_counts(config: Path) -> dict[str, int]:
    return dict(db_rows(config, "SELECT kind, COUNT(*) FROM vectors GROUP BY kind"))


def recall_all(config: Path) -> list[list[tuple]]:
    """For every query: (id, each channel's score) best first, from a freshly started front."""
    with front(config) as s:
        rankings = []
        for query in QUERIES:
            hits = s.ok("recall", {"query": query, "k": 8, "explain": True})["results"]
            rankings.append([(h["id"], *sorted((name, round(found["score"], 6)) for name, found
                                               in h["explain"]["channels"].items())) for h in hits])
        return rankings


def save_snapshots(config: Path) -> dict[str, snapshot.Header]:
    """Bring every snapshot up to date as the worker does (VectorIndex.save_snapshot), in this
    process: written, or serving already when nothing of its kind changed since."""
    store = open_store(StorageConfig(data_dir=data_dir(config)), migrate=False)
    try:
        _kind, model, dim, _count = store.vectors.space_figures()[0]
        for kind in KINDS:
            said = VectorIndex(store, kind, model, dim).save_snapshot()
            assert "written" in said or "serves (0 changes behind" in said, said
    finally:
        store.close()
    return {kind: snapshot.read_header(snapshot.path_for(data_dir(config), kind)) for kind in KINDS}


def memory_ids(config: Path) -> list[int]:
    return [r[0] for r in db_rows(config, "SELECT id FROM documents ORDER BY id")]


@pytest.mark.slow
def test_cold_start_from_a_snapshot_recalls_as_from_sqlite(store):
    from_sqlite = recall_all(store)
    assert snapshot_lines(store) == []  # no snapshot: an INFO line, below the WARNING level
    assert all(from_sqlite) and len({r[0][0] for r in from_sqlite}) > 1

    headers = save_snapshots(store)
    assert headers["document"].count == len(TEXTS) and headers["document"].seq == vector_seq(store)
    with_info = write_config(store.parent, **WITH_INFO)
    assert recall_all(with_info) == from_sqlite
    counts = vector_counts(store)
    assert loaded_from_snapshot(store) == {kind: (0, counts[kind]) for kind in KINDS}, front_log(store)


@pytest.mark.slow
def test_changes_after_the_snapshot_are_applied(store):
    save_snapshots(store)
    old = {kind: snapshot.path_for(data_dir(store), kind).read_bytes() for kind in KINDS}
    ids = memory_ids(store)
    with front(store) as s:
        added = s.ok("memorize", {"content": "We bought a red kayak to paddle on the river"})["id"]
        for gone in ids[:3]:
            s.ok("delete_memory", {"id": gone})
        s.ok("edit_memory", {"id": ids[3], "content": "Caroline now runs the Thursday book club"})
        # The long memory, shorter but still long: its passages are replaced, one fewer at least.
        s.ok("edit_memory", {"id": ids[-1], "content": TEXTS[-1][len(TEXTS[-1]) // 2:]})
    passages_before = vector_counts(store)["passage"]
    run_every_stage(store)
    assert all_processed(store, len(TEXTS) - 2)
    assert {kind: snapshot.path_for(data_dir(store), kind).read_bytes() for kind in KINDS} == old
    header = snapshot.read_header(snapshot.path_for(data_dir(store), "document"))
    assert header.seq < vector_seq(store)

    with_info = write_config(store.parent, **WITH_INFO)
    from_snapshot = recall_all(with_info)
    # Vectors added, replaced and deleted since were applied: the index holds what SQLite holds.
    counts, loaded = vector_counts(store), loaded_from_snapshot(store)
    assert {kind: n for kind, (_, n) in loaded.items()} == counts, front_log(store)
    assert all(changes > 0 for changes, _ in loaded.values())
    assert counts["document"] == len(TEXTS) - 2
    assert 0 < counts["passage"] < passages_before
    found = {i for ranking in from_snapshot for i, *_ in ranking}
    assert not found & set(ids[:3])  # deleted after the snapshot: tombstones honoured
    assert added in found and ids[3] in found

    for kind in KINDS:
        snapshot.path_for(data_dir(store), kind).unlink()
    assert recall_all(store) == from_snapshot


@pytest.mark.slow
def test_a_snapshot_newer_than_the_database_is_refused(store, tmp_path):
    save_snapshots(store)  # the store gets its id, which the older copy then carries
    backup = tmp_path / "older.db"
    with closing(sqlite3.connect(data_dir(store) / "aokun.db")) as source, closing(sqlite3.connect(backup)) as target:
        source.backup(target)
    gone = memory_ids(store)[0]
    with front(store) as s:
        s.ok("delete_memory", {"id": gone})
    headers = save_snapshots(store)
    # The older copy goes back into the same file (same inode): only the sequence tells.
    for suffix in ("-wal", "-shm"):
        Path(str(data_dir(store) / "aokun.db") + suffix).unlink(missing_ok=True)
    with open(data_dir(store) / "aokun.db", "r+b") as handle:
        handle.write(backup.read_bytes())
        handle.truncate()
    assert headers["document"].seq > vector_seq(store)

    rankings = recall_all(store)
    lines = snapshot_lines(store)
    assert len(lines) == 2 and all("newer than the database" in line for line in lines), lines
    assert gone in {i for ranking in rankings for i, *_ in ranking}  # back with the older copy


@pytest.mark.slow
def test_a_snapshot_from_before_a_restore_is_refused(store):
    save_snapshots(store)  # the store gets its id, which the backup then carries
    backed_up = aokun_in_process("backup", "--config", store)
    assert backed_up.returncode == 0, backed_up.stderr
    backup = backed_up.stdout.strip().splitlines()[-1]
    ids = memory_ids(store)
    with front(store) as s:
        s.ok("delete_memory", {"id": ids[0]})
    header = save_snapshots(store)["document"]
    restored = aokun_in_process("restore", backup, "--config", store)
    assert restored.returncode == 0, restored.stderr
    with front(store) as s:  # other deletions bring the sequence past the snapshot's
        for other in ids[1:]:
            s.ok("delete_memory", {"id": other})
            if vector_seq(store) >= header.seq:
                break
    assert vector_seq(store) >= header.seq

    rankings = recall_all(store)
    lines = snapshot_lines(store)
    assert len(lines) == len(KINDS) and all("made from another database" in line for line in lines), lines
    assert ids[0] in {i for ranking in rankings for i, *_ in ranking}


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "garbage"])
def test_a_damaged_snapshot_is_refused_with_one_log_line(store, damage):
    from_sqlite = recall_all(store)
    save_snapshots(store)
    path = snapshot.path_for(data_dir(store), "document")
    raw = bytearray(path.read_bytes())
    if damage == "flipped byte":
        raw[len(raw) // 2] ^= 0x40
    elif damage == "truncated":
        raw = raw[: len(raw) // 2]
    else:
        raw = bytearray(b"\x00not a snapshot at all\x00" * 100)
    path.write_bytes(bytes(raw))

    assert recall_all(store) == from_sqlite
    lines = snapshot_lines(store)
    assert len(lines) == 1 and "document vectors: snapshot" in lines[0] and "damaged" in lines[0], lines
    assert "building the index from the store" in lines[0]


def test_a_settle_watch_runs_once_changes_pause_or_wait_too_long():
    now, value, runs, attempts, failing = [0.0], [0], [], [0], [False]

    def run() -> str:
        attempts[0] += 1
        if failing[0]:
            raise OSError("disk full")
        runs.append(value[0])
        return "ran"

    watch = SettleWatch("test", lambda: value[0], run, settle_s=10, max_wait_s=100, clock=lambda: now[0])

    def at(t: float, v: int) -> bool:
        now[0], value[0] = t, v
        return watch.check()

    assert not at(0, 0) and not at(9, 0)
    assert at(10, 0) and runs == [0]  # the first settle after start runs (a missed job)
    assert not at(50, 0)  # nothing new: no run
    assert not at(51, 1) and not at(55, 2) and not at(64, 2)
    assert at(65, 2) and runs == [0, 2]  # 10 s after the last change, once
    assert not at(100, 2)
    ran_at = next(t for t in range(101, 300, 5) if at(t, t))  # changes that never pause
    assert ran_at == 201 and runs == [0, 2, 201]  # max_wait_s after the first of them
    failing[0] = True
    assert not at(210, 3) and not at(220, 3) and attempts[0] == 4  # failed (and logged)
    failing[0] = False
    assert not at(270, 3) and attempts[0] == 4  # a failed run waits 60 s at least
    assert at(281, 3) and runs[-1] == 3
