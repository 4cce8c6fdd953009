"""A real worker process writes the FAISS snapshots once vector writes settle, not on every
change, and rewrites them after later changes; a front then starts from the snapshot
(tests/test_snapshot.py: the snapshots themselves, the front built in the test process)."""

from __future__ import annotations

import pytest

from aokun_worker.service import SNAPSHOT_SETTLE_S
from helpers import all_processed, db_rows, start_worker, stop, wait_for, write_config
from shared.search import snapshot
from snapshot_fronts import SETTINGS, TEXTS, WITH_INFO, data_dir, front, front_log, loaded_from_snapshot, vector_seq


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
            # One job writes the snapshots one kind after another: the graph entries' follows.
            entry_path = snapshot.path_for(data_dir(config), "graph_entry")
            entries = wait_for(lambda: (h := snapshot.read_header(entry_path)).seq == seq and h, 60,
                               what="the graph entries' snapshot rewritten")
            assert entries.count > 0
    finally:
        assert stop(worker) == 0
    assert "snapshots: document snapshot written" in (tmp_path / "worker-test.log").read_text()

    with_info = write_config(tmp_path, **WITH_INFO)
    with front(with_info) as s:
        assert s.ok("recall", {"query": "kitten", "k": 1})["results"]
    assert loaded_from_snapshot(config)["document"] == (0, 4), front_log(config)
