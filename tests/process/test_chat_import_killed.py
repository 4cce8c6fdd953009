"""A chat export's import killed with SIGKILL mid-way and run again resumes where it stopped and
stores each conversation exactly once."""

from __future__ import annotations

import pytest

from chat_exports import many_conversations, write_export
from helpers import aokun_in_process, db_rows, import_killed, last_line, write_config

CONVERSATIONS = 300  # far more than the kill lets through


@pytest.mark.slow
def test_chat_import_killed_mid_way_then_run_again_stores_each_conversation_exactly_once(tmp_path):
    config = write_config(tmp_path, memory={"time_zone": "UTC"})
    export = write_export(tmp_path / "conversations.json", many_conversations("chatgpt", CONVERSATIONS))
    expected = [f"Conversation {i} (ChatGPT)" for i in range(CONVERSATIONS)]

    committed = import_killed(config, export, 20)
    assert 20 <= committed < CONVERSATIONS, "the kill came after the import had finished"

    result = aokun_in_process("import", export, "--config", config)
    assert result.returncode == 0, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("resuming after conversation "), result.stdout
    # The position is written after each conversation's commit: at most the one being stored
    # when the kill came is after it, found present, not stored again.
    resumed_at = int(first.split()[3].rstrip(","))
    assert committed - 1 <= resumed_at <= committed
    assert last_line(result).startswith(f"imported {CONVERSATIONS - committed}, already present "
                                        f"{committed - resumed_at}, skipped 0")
    headings = [t.split("] ", 1)[1].split("\n")[0] for (t,) in db_rows(config, "SELECT text FROM documents")]
    assert sorted(headings) == sorted(expected)
    assert db_rows(config, "SELECT COUNT(DISTINCT source_hash) FROM documents") == [(CONVERSATIONS,)]
    assert db_rows(config, "SELECT COUNT(*) FROM memory_stages") == [(3 * CONVERSATIONS,)]
    assert db_rows(config, "PRAGMA integrity_check") == [("ok",)]
    assert last_line(aokun_in_process("import", export, "--config", config)).startswith(
        f"imported 0, already present {CONVERSATIONS}, skipped 0")
