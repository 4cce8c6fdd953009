"""An import killed with SIGKILL mid-way and run again stores each row exactly once."""

from __future__ import annotations

import json

import pytest

from helpers import aokun_in_process, db_rows, import_killed, last_line, write_config

ENTITIES = 300  # two observations each: 600 rows, far more than the kill lets through


@pytest.mark.slow
def test_import_killed_mid_way_then_run_again_stores_each_row_exactly_once(tmp_path):
    config = write_config(tmp_path)
    path = tmp_path / "memory.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i in range(ENTITIES):
            out.write(json.dumps({"type": "entity", "name": f"Person_{i}", "entityType": "person",
                                  "observations": [f"Was born in town number {i}",
                                                   f"Keeps {i} books on the shelf"]}) + "\n")
    expected = {f"Person_{i}: {what}" for i in range(ENTITIES)
                for what in (f"Was born in town number {i}", f"Keeps {i} books on the shelf")}

    committed = import_killed(config, path, 50)
    assert 50 <= committed < len(expected), "the kill came after the import had finished"

    result = aokun_in_process("import", path, "--config", config)
    assert last_line(result).startswith(f"imported {len(expected) - committed}, already present {committed}, skipped 0")
    texts = [t.split("] ", 1)[1] for (t,) in db_rows(config, "SELECT text FROM documents")]
    assert len(texts) == len(expected) and set(texts) == expected
    assert db_rows(config, "SELECT COUNT(DISTINCT source_hash) FROM documents") == [(len(expected),)]
    assert db_rows(config, "SELECT COUNT(*) FROM memory_stages") == [(3 * len(expected),)]
    assert db_rows(config, "PRAGMA integrity_check") == [("ok",)]
    assert last_line(aokun_in_process("import", path, "--config", config)).startswith(
        f"imported 0, already present {len(expected)}")
