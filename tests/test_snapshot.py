"""FAISS snapshots: a front (built in this process, as aokun-server builds it) starts from the
snapshot and the vector changes since and recalls exactly as a front that built its index from
SQLite; a snapshot newer than the database, one from before a restore, or a damaged one is
refused with one log line; a real worker process writes the snapshot once vector writes
settle. The other stages a worker would run are run here by the worker's own runner."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from aokun_worker.periodic import SettleWatch
from aokun_worker.service import SNAPSHOT_SETTLE_S
from helpers import (
    BIN,
    all_processed,
    db_rows,
    front_in_process,
    logging_to,
    run_every_stage,
    start_worker,
    stop,
    wait_for,
    write_config,
)
from shared.config import ALL_TOOLS, StorageConfig, load_config
from shared.search import snapshot
from shared.search.vectors import VectorIndex
from shared.store import open_store
from shared.store.model.vectors import KINDS

TEXTS = [
    "I adopted a small grey cat named Mochi last spring",
    "My sister lives in Lisbon and works as an architect",
    "下周三下午要和同事开项目评审会",
    "Caroline went to an LGBTQ support group meeting on Tuesday",
    "Melanie painted a sunrise over the lake last week",
    "我最喜欢的茶是西湖龙井",
    "The project review moved to Friday because the client was travelling",
    "Jon is training for the Berlin marathon in September",
    "我们计划明年春天去京都看樱花",
    "The dentist said to floss every evening and come back in six months",
    "Grandma's recipe for dumplings uses pork, cabbage and a little ginger",
    "I switched from coffee to green tea because of my sleep",
]
QUERIES = ["kitten", "where does my sister live", "喝茶", "support group", "travel plans in spring"]
# The vector channels only, so every ranking comes from the two FAISS indexes; no
# reinforcement, so recalling changes nothing that a later recall reads.
SETTINGS = {"retrieval": {"channels": ["vector", "graph_vector"], "access_reinforcement": False},
            "server": {"exposed_tools": list(ALL_TOOLS)}}
WITH_INFO = {**SETTINGS, "server": {**SETTINGS["server"], "log_level": "INFO"}}


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


def data_dir(config: Path) -> Path:
    return config.parent / "data"


@contextmanager
def front(config: Path):
    """A new front on the config, built in this process; its log (at server.log_level, as the
    process writes it to stderr) goes to front.log beside the config."""
    with open(config.parent / "front.log", "w") as log, logging_to(log, load_config(config).server.log_level):
        with front_in_process(config) as session:
            yield session


def front_log(config: Path) -> list[str]:
    return (config.parent / "front.log").read_text().splitlines()


def snapshot_lines(config: Path) -> list[str]:
    return [line for line in front_log(config) if "snapshot" in line]


def loaded_from_snapshot(config: Path) -> dict[str, tuple[int, int]]:
    """{kind: (changes applied, vectors in the index)} from the front's log lines."""
    found = {}
    for line in snapshot_lines(config):
        if match := re.search(r"(\w+) vectors: loaded snapshot .* applied (\d+) changes since: (\d+) vectors", line):
            found[match[1]] = (int(match[2]), int(match[3]))
    return found


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
    """Write both snapshots as the worker does (VectorIndex.save_snapshot), in this process."""
    store = open_store(StorageConfig(data_dir=data_dir(config)), migrate=False)
    try:
        _kind, model, dim, _count = store.vectors.space_figures()[0]
        for kind in KINDS:
            assert "written" in VectorIndex(store, kind, model, dim).save_snapshot()
    finally:
        store.close()
    return {kind: snapshot.read_header(snapshot.path_for(data_dir(config), kind)) for kind in KINDS}


def vector_seq(config: Path) -> int:
    return int(db_rows(config, "SELECT value FROM meta WHERE key = 'vector_seq'")[0][0])


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
    backup = subprocess.run([str(BIN / "aokun"), "backup", "--config", str(store)],
                            capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    ids = memory_ids(store)
    with front(store) as s:
        s.ok("delete_memory", {"id": ids[0]})
    header = save_snapshots(store)["document"]
    subprocess.run([str(BIN / "aokun"), "restore", backup, "--config", str(store)], check=True,
                   capture_output=True)
    with front(store) as s:  # other deletions bring the sequence past the snapshot's
        for other in ids[1:]:
            s.ok("delete_memory", {"id": other})
            if vector_seq(store) >= header.seq:
                break
    assert vector_seq(store) >= header.seq

    rankings = recall_all(store)
    lines = snapshot_lines(store)
    assert len(lines) == 2 and all("made from another database" in line for line in lines), lines
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


@pytest.mark.slow
def test_the_worker_writes_snapshots_once_changes_settle(tmp_path):
    config = write_config(tmp_path, **SETTINGS)
    document = snapshot.path_for(data_dir(config), "document")
    worker = start_worker(config)
    try:
        with front(config) as s:
            for text in TEXTS[:3]:
                s.ok("memorize", {"content": text})
            wait_for(lambda: all_processed(config, 3), 120, what="memories embedded")
            seq = vector_seq(config)
            header = wait_for(lambda: document.exists() and snapshot.read_header(document), 60,
                              what="the document snapshot")
            assert (header.seq, header.count) == (seq, 3)
            # Not on every change: once vector writes have paused for SNAPSHOT_SETTLE_S.
            last_write = db_rows(config, "SELECT MAX(create_time) FROM vectors")[0][0]
            assert header.created - last_write >= SNAPSHOT_SETTLE_S - 1

            s.ok("memorize", {"content": TEXTS[3]})
            wait_for(lambda: all_processed(config, 4), 120, what="the fourth memory embedded")
            seq = vector_seq(config)
            header = wait_for(lambda: (h := snapshot.read_header(document)).seq == seq and h, 60,
                              what="the snapshot rewritten")
            assert header.count == 4
            entries = snapshot.read_header(snapshot.path_for(data_dir(config), "graph_entry"))
            assert entries.seq == seq and entries.count > 0
    finally:
        assert stop(worker) == 0
    assert "snapshots: document snapshot written" in (tmp_path / "worker-test.log").read_text()

    with_info = write_config(tmp_path, **WITH_INFO)
    with front(with_info) as s:
        assert s.ok("recall", {"query": "kitten", "k": 1})["results"]
    assert loaded_from_snapshot(config)["document"] == (0, 4), front_log(config)


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
