"""Delete means gone, end to end with processes: after the real delete tool of a real stdio
front, with a real worker having embedded, atomised and linked the memory, no word of it is
readable in the database file, the WAL the processes wrote, or a backup `aokun backup` takes
afterwards (tests/test_delete_gone.py: the store's own functions, in the test process)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from deleted_words import DOOMED, KEPT, KEPT_NEEDLE, NEEDLES, db_files, files_holding, fts_blobs_holding
from fake_openai import FakeEmbeddingsServer
from helpers import BIN, all_processed, db_rows, mcp_session, start_worker, stdio_params, stop, wait_for, write_config
from shared.store.sqlite import fts

# -- end to end: a real front and worker, the real delete tool, a real backup -------------


@pytest.mark.slow
def test_deleted_memory_is_gone_from_database_wal_and_backup(tmp_path):
    """Fails until the delete path calls fts.scrub_terms and fts.flush_deleted."""
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(tmp_path, embedding={"provider": "openai", "base_url": api.base_url,
                                                   "model": "fake", "dimensions": 32},
                              server={"exposed_tools": ["memorize", "recall", "delete_memory"]})
        worker = start_worker(config)
        try:
            with mcp_session(stdio_params(config)) as s:
                doomed = s.ok("memorize", {"content": DOOMED})["id"]
                s.ok("memorize", {"content": KEPT})
                wait_for(lambda: all_processed(config, 2) and db_rows(
                    config, "SELECT COUNT(*) FROM memory_stages WHERE status != 'done'") == [(0,)],
                    60, what="both memories embedded, atomised and in the graph")
                stop(worker)  # no reader of the worker's may hold a snapshot across the delete
                for needle in NEEDLES:  # indexed everywhere: the check below can fail
                    assert fts_blobs_holding(config, needle) == list(fts.FTS_TABLES), repr(needle)
                s.ok("delete_memory", {"id": doomed})
                run = subprocess.run([BIN / "aokun", "backup", "--config", config],
                                     capture_output=True, text=True, timeout=120)
                assert run.returncode == 0, run.stderr
                backup = Path(run.stdout.strip().splitlines()[-1])
                files = [*db_files(tmp_path / "data"), backup]
                # Read while the front runs: its last connection closing would checkpoint.
                leaks = {repr(needle): files_holding(files, needle) + fts_blobs_holding(config, needle)
                         for needle in NEEDLES}
                recalled = s.ok("recall", {"query": "Plixomundra printer"})["results"]
        finally:
            stop(worker)
    assert leaks == {repr(needle): [] for needle in NEEDLES}
    assert KEPT_NEEDLE in backup.read_bytes()
    assert recalled[0]["text"].endswith(KEPT)
