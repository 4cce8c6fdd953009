"""`aokun ingest`: transcripts (Claude Code JSONL, "Name: text", JSON turns) summarized and
memorized once, through the real command (its main(), in this process) against a real
database."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import pytest

from claude_code import THOUGHT_WORD, TOOL_WORD, claude_transcript
from helpers import aokun_in_process, db_rows, last_line, write_config
from shared.errors import InvalidInput
from shared.summarize.transcripts import read_transcript

TEXT_TRANSCRIPT = """Caroline: I went to a LGBTQ support group yesterday and it was so powerful.
Melanie: That's great! What happened there?
Caroline: The transgender stories were inspiring.
I am going to apply to counseling programs next month.
Melanie: I love painting landscapes; I painted a lake sunrise last year.
"""


# -- readers ----------------------------------------------------------------------------


def test_claude_code_transcript_keeps_the_conversation_only(tmp_path):
    turns = read_transcript(claude_transcript(tmp_path / "session.jsonl"))
    assert [(t.speaker, t.text) for t in turns] == [
        ("user", "I adopted a cat named Luna last week. I am going to take her to the vet tomorrow."),
        ("assistant", "Congratulations on adopting Luna!"),
        ("user", "I prefer green tea over coffee."),
        ("assistant", "Noted: green tea it is."),
    ]
    assert turns[0].time == datetime(2025, 3, 14, 9, 1, tzinfo=timezone.utc)


def test_readers_of_our_json_turns_and_text(tmp_path):
    listed = tmp_path / "turns.json"
    listed.write_text(json.dumps([{"speaker": "Ann", "text": "I moved to Oslo", "time": "2024-01-02T10:00:00"},
                                  {"speaker": "Bo", "text": "Nice"}]), encoding="utf-8")
    lined = tmp_path / "turns.jsonl"
    lined.write_text('{"speaker": "Ann", "text": "I moved to Oslo"}\n{"speaker": "Bo", "text": "Nice"}\n'
                     '{"speaker": "Bo", "te', encoding="utf-8")  # a last line still being written
    for path in (listed, lined):
        assert [(t.speaker, t.text) for t in read_transcript(path)] == [("Ann", "I moved to Oslo"), ("Bo", "Nice")]
    text = tmp_path / "chat.txt"
    text.write_text(TEXT_TRANSCRIPT, encoding="utf-8")
    turns = read_transcript(text)
    assert [t.speaker for t in turns] == ["Caroline", "Melanie", "Caroline", "Melanie"]
    assert turns[2].text.endswith("counseling programs next month.")  # a continuation line
    assert read_transcript(text, "text") == turns
    with pytest.raises(InvalidInput, match=r"line 1 is not JSON.*--format text"):
        read_transcript(text, "jsonl")
    with pytest.raises(InvalidInput, match="transcript not found"):
        read_transcript(tmp_path / "missing.jsonl")


# -- the command ------------------------------------------------------------------------


@pytest.mark.slow
def test_claude_code_session_ingested_once(tmp_path):
    config = write_config(tmp_path)
    transcript = claude_transcript(tmp_path / "session.jsonl")
    first = aokun_in_process("ingest", transcript, "--persona", "me", "--config", config)
    memory_id = int(last_line(first))
    again = aokun_in_process("ingest", transcript, "--persona", "me", "--config", config)
    assert last_line(again) == f"already stored as {memory_id}"
    rows = db_rows(config, "SELECT id, text, persona_id, participants, key_facts, source_hash FROM documents")
    assert len(rows) == 1 and rows[0][0] == memory_id and rows[0][2] == "me"
    _, text, _, participants, key_facts, source_hash = rows[0]
    stored = text + participants + key_facts
    assert TOOL_WORD not in stored and THOUGHT_WORD not in stored and "Sub-agent" not in stored
    assert "Luna" in stored
    assert not {"user", "assistant"} & set(json.loads(participants))  # roles, not people
    assert len(source_hash) == 64
    # The memory happened when the session ended: its last turn's time.
    assert text.startswith("[2025-03-14 09:02]")
    # Stages are queued through the Huey queue like every CLI write (a worker will run them).
    assert db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE memory_id = ?", (memory_id,)) == [(3,)]


@pytest.mark.slow
def test_text_transcript_ingested_once_and_dry_run_stores_nothing(tmp_path):
    config = write_config(tmp_path)
    path = tmp_path / "chat.txt"
    path.write_text(TEXT_TRANSCRIPT, encoding="utf-8")
    # A transcript without times happened when its file was last written.
    written = datetime(2024, 6, 3, 12, 0, tzinfo=timezone.utc).timestamp()
    os.utime(path, (written, written))
    dry = aokun_in_process("ingest", path, "--dry-run", "--session", "s1", "--config", config)
    assert dry.returncode == 0, dry.stderr
    memory = json.loads(dry.stdout)
    assert memory["provider"] == "rules" and {"Caroline", "Melanie"} <= set(memory["participants"])
    group = [f for f in memory["key_facts"] if "Caroline" in f and "support group" in f]
    assert len(group) == 1 and ("2 June 2024" in group[0] or "2024-06-02" in group[0]), group
    assert db_rows(config, "SELECT COUNT(*) FROM documents") == [(0,)]
    memory_id = int(last_line(aokun_in_process("ingest", path, "--session", "s1", "--config", config)))
    again = aokun_in_process("ingest", path, "--session", "s1", "--config", config)
    assert last_line(again) == f"already stored as {memory_id}"
    rows = db_rows(config, "SELECT id, session_id, persona_id, substr(text, 1, 18) FROM documents")
    assert rows == [(memory_id, "s1", None, "[2024-06-03 12:00]")]


@pytest.mark.slow
def test_from_hook_reads_the_transcript_path_and_session_from_stdin(tmp_path):
    config = write_config(tmp_path)
    transcript = claude_transcript(tmp_path / "session.jsonl")
    hook = json.dumps({"session_id": "3f2a-session", "transcript_path": str(transcript), "cwd": str(tmp_path),
                       "hook_event_name": "SessionEnd", "reason": "exit"})
    memory_id = int(last_line(aokun_in_process("ingest", "--from-hook", "--config", config, stdin=hook)))
    assert db_rows(config, "SELECT id, session_id FROM documents") == [(memory_id, "3f2a-session")]
    # PreCompact on the same, unchanged transcript: still one memory.
    pre_compact = hook.replace("SessionEnd", "PreCompact")
    compacted = aokun_in_process("ingest", "--from-hook", "--config", config, stdin=pre_compact)
    assert last_line(compacted) == f"already stored as {memory_id}"
    # A session that said nothing yet is no error for a hook.
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"type": "summary", "summary": "s", "leafUuid": "x"}) + "\n", encoding="utf-8")
    quiet = aokun_in_process("ingest", "--from-hook", "--config", config,
                             stdin=json.dumps({"transcript_path": str(empty)}))
    assert quiet.returncode == 0 and "nothing to remember" in quiet.stdout
    # Bad hook input, or a FILE as well: one line, exit 2.
    bad = aokun_in_process("ingest", "--from-hook", "--config", config, stdin="not json")
    assert bad.returncode == 2 and "--from-hook" in bad.stderr and "Traceback" not in bad.stderr
    both = aokun_in_process("ingest", transcript, "--from-hook", "--config", config, stdin=hook)
    assert both.returncode == 2 and "either a transcript FILE or --from-hook" in both.stderr
    assert db_rows(config, "SELECT COUNT(*) FROM documents") == [(1,)]
