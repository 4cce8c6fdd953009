"""Sessions that name dates, with Claude Code's "Z" timestamps, for a user in Los Angeles: the
`aokun ingest --from-hook` (its main(), in this process) stores the memory and the worker's
stages (its own runner, here) give its plans their deadlines on the user's clock;
summarize_memory over the official MCP client does the same."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from claude_code import dated_transcript, z_time
from fake_openai import FakeEmbeddingsServer
from helpers import aokun_in_process, db_rows, front_in_process, run_every_stage, write_config

LA = ZoneInfo("America/Los_Angeles")
# 06:30 on 20 December in UTC is 22:30 on the 19th in Los Angeles: "tomorrow" is the 20th there.
START = datetime(2025, 12, 20, 6, 30, tzinfo=timezone.utc)
TURNS = [("user", "I'm moving to Berlin on January 15, I can't wait."),
         ("assistant", "That's exciting! Do you need help planning the move?"),
         ("user", "我12月20日要去上海见我妈妈。"),
         ("assistant", "Have a good trip to Shanghai."),
         ("user", "Also I have a dentist appointment at 3pm tomorrow.")]
LAST_SAID = START + timedelta(seconds=40 * (len(TURNS) - 1))


def claude_transcript(path: Path) -> Path:
    return dated_transcript(path, TURNS, START, session="berlin")


def config_in_los_angeles(folder: Path, api) -> Path:
    return write_config(folder, memory={"time_zone": "America/Los_Angeles"},
                        embedding={"provider": "openai", "base_url": api.base_url, "model": "fake", "dimensions": 32},
                        queue={"retry_base_s": 0.2},
                        server={"exposed_tools": ["memorize", "summarize_memory", "search_atoms"]})


def deadlines_on_the_users_clock(config: Path, memory_id: int) -> dict[str, datetime]:
    rows = db_rows(config, "SELECT text, deadline FROM memory_atoms WHERE memory_id = ? AND type = 'planned'"
                           " AND deadline IS NOT NULL", (memory_id,))
    return {text: datetime.fromtimestamp(deadline, LA) for text, deadline in rows}


def expected_plans(found: dict[str, datetime]) -> None:
    dentist = [due for text, due in found.items() if "dentist" in text]
    berlin = [due for text, due in found.items() if "Berlin" in text]
    assert dentist == [datetime(2025, 12, 20, 15, 0, tzinfo=LA)], found
    assert berlin == [datetime(2026, 1, 15, 23, 59, 59, tzinfo=LA)], found


@pytest.mark.slow
def test_ingest_from_hook_of_a_dated_claude_code_session(tmp_path):
    with FakeEmbeddingsServer(dim=32) as api:
        config = config_in_los_angeles(tmp_path, api)
        transcript = claude_transcript(tmp_path / "session.jsonl")
        hook = json.dumps({"session_id": "berlin", "transcript_path": str(transcript), "cwd": str(tmp_path),
                           "hook_event_name": "SessionEnd", "reason": "exit"})
        done = aokun_in_process("ingest", "--from-hook", "--config", config, stdin=hook)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
        memory_id = int(done.stdout.strip().splitlines()[-1])
        [(text, original_time, key_facts)] = db_rows(
            config, "SELECT text, original_time, key_facts FROM documents WHERE id = ?", (memory_id,))
        # The session ended at 22:32 on the 19th on the user's clock; its dates are the user's.
        assert text.startswith("[2025-12-19 22:32]") and original_time == "2025-12-19T22:32:40-08:00"
        facts = " ".join(json.loads(key_facts))
        assert "15 January 2026" in facts and "2025年12月20日" in facts and "20 December 2025" in facts, facts
        run_every_stage(config)
        assert db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE stage = 'atoms' AND status = 'done'") == [(1,)]
        expected_plans(deadlines_on_the_users_clock(config, memory_id))


@pytest.mark.slow
def test_summarize_memory_with_z_times_and_a_dated_turn(tmp_path):
    conversation = [{"speaker": "Sam" if kind == "user" else "Assistant", "text": text,
                     "time": z_time(START + timedelta(seconds=40 * n))} for n, (kind, text) in enumerate(TURNS)]
    with FakeEmbeddingsServer(dim=32) as api:
        config = config_in_los_angeles(tmp_path, api)
        with front_in_process(config) as s:
            shown = s.ok("summarize_memory", {"conversation": conversation})
            stored = s.ok("summarize_memory", {"conversation": conversation, "store": True, "persona_id": "sam"})
        run_every_stage(config)
        assert db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE stage = 'atoms' AND status = 'done'") == [(1,)]
    assert shown["key_facts"] == stored["key_facts"]
    facts = " ".join(stored["key_facts"])
    assert "15 January 2026" in facts and "20 December 2025" in facts, facts
    assert stored["stored"] and stored["text"].startswith("[2025-12-19 22:32]")
    expected_plans(deadlines_on_the_users_clock(config, stored["id"]))
