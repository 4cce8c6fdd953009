"""The admin CLI (its main(), in this process): doctor, repair and rebuild-index against a real
database; the stages a worker would run are run here by the worker's own runner."""

from __future__ import annotations

import subprocess

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import all_processed, aokun_in_process, db_rows, front_in_process, run_every_stage, write_config


def aokun(config, *args) -> subprocess.CompletedProcess:
    return aokun_in_process(*args, "--config", config)


@pytest.mark.slow
def test_doctor_repair_and_rebuild_index(tmp_path):
    with FakeEmbeddingsServer(dim=16) as api:
        config = write_config(tmp_path, embedding={"provider": "openai", "base_url": api.base_url,
                                                   "model": "fake", "dimensions": 16})
        with front_in_process(config) as s:
            ids = [s.ok("memorize", {"content": f"note {i} about tea"})["id"] for i in range(5)]
        doctor = aokun(config, "doctor")
        # Work waiting with nobody to do it is a problem, said plainly.
        assert doctor.returncode == 1 and "15 stages pending, no worker has ever run" in doctor.stdout
        run_every_stage(config)
        assert all_processed(config, 5)
        doctor = aokun(config, "doctor")
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert "consistent" in doctor.stdout

        # A stage that failed for good is a problem until repair --apply retries it.
        import sqlite3
        conn = sqlite3.connect(tmp_path / "data" / "aokun.db")
        with conn:
            conn.execute("UPDATE memory_stages SET status = 'failed', last_error = 'boom'"
                         " WHERE memory_id = ? AND stage = 'embed'", (ids[0],))
        conn.close()
        doctor = aokun(config, "doctor")
        assert doctor.returncode == 1 and f"memory {ids[0]}: embed stage failed" in doctor.stdout
        report = aokun(config, "repair")
        assert "1 failed stage(s), 0 missing output(s); run with --apply" in report.stdout
        assert db_rows(config, "SELECT status FROM memory_stages WHERE memory_id = ? AND stage = 'embed'",
                       (ids[0],)) == [("failed",)]
        applied = aokun(config, "repair", "--apply")
        assert applied.returncode == 0 and "1 failed stage(s) set to retry" in applied.stdout
        assert db_rows(config, "SELECT status FROM memory_stages WHERE memory_id = ? AND stage = 'embed'",
                       (ids[0],)) == [("pending",)]

        rebuilt = aokun(config, "rebuild-index")
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert "rebuilt: 5 memories have vectors" in rebuilt.stdout
        assert "5/5" not in rebuilt.stderr  # no progress bar written into a pipe
        assert db_rows(config, "SELECT DISTINCT model, dim FROM vectors") == [("openai:fake", 16)]
        assert db_rows(config, "SELECT COUNT(*) FROM workers") == [(0,)]

    # Another model configured: doctor says the stored vectors do not match.
    with FakeEmbeddingsServer(dim=8) as other:
        config = write_config(tmp_path, embedding={"provider": "openai", "base_url": other.base_url,
                                                   "model": "other", "dimensions": 8})
        doctor = aokun(config, "doctor")
        assert doctor.returncode == 1 and "do not match the configured embedder openai:other" in doctor.stdout
        assert aokun(config, "rebuild-index").returncode == 0
        assert db_rows(config, "SELECT DISTINCT model, dim FROM vectors") == [("openai:other", 8)]
        # The graph's entries take the new vectors too (the graph stages ran after the embed ones).
        entries = db_rows(config, "SELECT COUNT(*) FROM graph_entries")
        entry_vectors = db_rows(config, "SELECT COUNT(*) FROM vectors WHERE kind = 'graph_entry'")
        assert entries[0][0] > 0 and entry_vectors == entries
        assert aokun(config, "doctor").returncode == 0
