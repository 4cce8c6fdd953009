"""`aokun import` of ChatGPT's and Claude's conversations.json: each conversation one summarized
memory (its title, its start as the memory's time, the user's statements as facts about the
user), once however often it is imported, bad conversations reported and skipped, and an import
that stopped resumed where it stopped. Through the real command (its main(), in this process)
against a real database; the exports are generated in the shape of the real ones."""

from __future__ import annotations

import json
import sqlite3

import pytest

from chat_exports import (
    ABANDONED_WORD,
    ASSISTANT_WORD,
    CHINESE,
    ENGLISH,
    SYSTEM_WORD,
    TOOL_WORD,
    chatgpt_conversation,
    claude_conversation,
    many_conversations,
    write_export,
)
from helpers import aokun_in_process, db_rows, last_line, run_every_stage, write_config
from shared.transfer.json_array import CHUNK, array_items

KINDS = {"chatgpt": (chatgpt_conversation, "ChatGPT"), "claude": (claude_conversation, "Claude")}


def chat_config(tmp_path):
    return write_config(tmp_path, memory={"time_zone": "UTC"})


def reports(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("aokun import:")]


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_export_imported_twice_gives_each_conversation_once(tmp_path, kind):
    make, assistant = KINDS[kind]
    config = chat_config(tmp_path)
    bad = ({"title": "Broken tree", "id": "bad-1", "mapping": {"a": {"message": None, "parent": "gone"}},
            "current_node": "a"} if kind == "chatgpt" else
           {"uuid": "bad-1", "name": "Broken tree", "chat_messages": "not a list"})
    export = write_export(tmp_path / "conversations.json",
                          [make(0, "Luna the cat", ENGLISH), bad, make(2, "学游泳", CHINESE)],
                          indent=None if kind == "chatgpt" else 2)

    first = aokun_in_process("import", export, "--config", config)
    assert first.returncode == 1, first.stderr  # one conversation skipped
    assert last_line_any(first) == (f"imported 2, already present 0, skipped 1 (3 conversations, {kind}, "
                                    f"from {export})")
    problem = ("current_node's branch is broken: node 'gone' is not in the mapping" if kind == "chatgpt"
               else "chat_messages must be a list of messages")
    assert reports(first) == [
        f"aokun import: conversations.json conversation 2 (“Broken tree”, id bad-1): {problem}; skipped"]
    again = aokun_in_process("import", export, "--config", config)
    assert last_line_any(again).startswith("imported 0, already present 2, skipped 1")

    rows = db_rows(config, "SELECT text, key_facts, participants, session_id, persona_id, source_hash "
                           "FROM documents ORDER BY id")
    assert len(rows) == 2 and len({r[5] for r in rows}) == 2
    (english, english_facts, people, session, persona, _), (chinese, chinese_facts, *_) = rows
    # The title with the assistant's name heads the summary; the memory's time is when the
    # conversation began.
    assert english.startswith(f"[2024-05-08 10:00] Luna the cat ({assistant})\n")
    assert chinese.startswith(f"[2024-05-10 10:00] 学游泳 ({assistant})\n")
    assert session == f"{kind}-{make(0, '', [])['id' if kind == 'chatgpt' else 'uuid']}" and persona is None
    assert not {"user", "assistant"} & set(json.loads(people))  # roles, not people
    # The user's statements are the key facts, the user their subject; the assistant's are none.
    english_facts, chinese_facts = json.loads(english_facts), json.loads(chinese_facts)
    assert any("adopted a cat named Luna" in f for f in english_facts)
    assert any("green tea" in f for f in english_facts)
    assert any("游泳" in f for f in chinese_facts) and any("小学" in f for f in chinese_facts)
    stored = " ".join(r[0] + r[1] for r in rows)
    for word in (ASSISTANT_WORD, TOOL_WORD, SYSTEM_WORD, ABANDONED_WORD):
        assert word not in stored, word
    # Dates in what the user said resolve against when they said it.
    assert any("29 April 2024" in f for f in english_facts), english_facts

    run_every_stage(config)
    atoms = db_rows(config, "SELECT text, subject FROM memory_atoms ORDER BY id")
    about_user = [text for text, subject in atoms if subject == "self"]
    assert any("Luna" in t for t in about_user) and any("游泳" in t for t in about_user), atoms
    assert not any(ASSISTANT_WORD in t for t, _ in atoms)


def last_line_any(result) -> str:
    """The last line printed, whatever the exit code (1 when conversations were skipped)."""
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_bad_conversations_are_reported_one_line_each_and_skipped(tmp_path):
    config = chat_config(tmp_path)
    good = chatgpt_conversation(0, "Luna the cat", ENGLISH)
    looping = chatgpt_conversation(3, "Loop", ENGLISH)
    looping["mapping"]["client-created-root"]["parent"] = looping["current_node"]
    far_future = chatgpt_conversation(5, "Far future", ENGLISH)
    far_future["create_time"] = 1e13
    only_system = chatgpt_conversation(6, "Only the system", [])
    conversations = [good, "not a conversation", {"title": "No id", "mapping": {}}, looping,
                     {**chatgpt_conversation(4, "Unreadable", [("user", "I adopted a BYTES cat.")]),
                      "conversation_id": "bytes"},
                     far_future, only_system]
    # Bytes that are no UTF-8 in the fifth conversation's question.
    raw = json.dumps(conversations, ensure_ascii=False).encode().replace(b"BYTES", b"\xff")
    cut = raw[:-1] + b", {\"title\": \"Cut\", \"mapping\": {"  # a download cut short
    export = tmp_path / "conversations.json"
    export.write_bytes(cut)

    result = aokun_in_process("import", export, "--format", "chatgpt", "--config", config)
    assert result.returncode == 1
    assert last_line_any(result).startswith("imported 1, already present 0, skipped 7")
    lines = reports(result)
    assert len(lines) == 7, lines
    assert lines[0] == ("aokun import: conversations.json conversation 2: not a conversation: a JSON object "
                        "is expected (got str); skipped")
    assert lines[1].startswith("aokun import: conversations.json conversation 3 (“No id”): no id")
    assert lines[2].startswith("aokun import: conversations.json conversation 4 (“Loop”, id 6650f5a1-")
    assert "is its own ancestor (a loop); skipped" in lines[2]
    assert lines[3].startswith("aokun import: conversations.json conversation 5 (“Unreadable”, id bytes): "
                               "not valid UTF-8: byte 0xff")
    assert lines[4].startswith("aokun import: conversations.json conversation 6 (“Far future”")
    assert "out of range" in lines[4]
    assert lines[5].startswith("aokun import: conversations.json conversation 7 (“Only the system”")
    assert "no messages" in lines[5]
    assert lines[6].startswith("aokun import: conversations.json conversation 8 (from byte ")
    assert lines[6].endswith("the file ends inside it: the rest of the file cannot be read; skipped")
    assert db_rows(config, "SELECT COUNT(*) FROM documents") == [(1,)]


@pytest.mark.parametrize("content, message", [
    ("[]", "chatgpt or claude (their conversations.json)"),
    ('[{"messages": []}]', "chatgpt or claude (their conversations.json)"),
    ('[{"title": "cut', "chatgpt or claude (their conversations.json)"),
])
def test_arrays_that_are_no_chat_export_are_refused_in_one_line(tmp_path, content, message):
    config = chat_config(tmp_path)
    path = tmp_path / "conversations.json"
    path.write_text(content, encoding="utf-8")
    result = aokun_in_process("import", path, "--config", config)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    missing = aokun_in_process("import", tmp_path / "nothing.json", "--format", "claude", "--config", config)
    assert missing.returncode == 2 and "not found: give the conversations.json" in missing.stderr
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"text": "a row"}\n', encoding="utf-8")
    wrong = aokun_in_process("import", lines, "--format", "claude", "--config", config)
    assert wrong.returncode == 2 and "is no Claude conversations.json (not a JSON array)" in wrong.stderr
    assert not (tmp_path / "data" / "imports").exists() or not any((tmp_path / "data" / "imports").iterdir())


def test_an_import_stopped_by_a_storage_failure_resumes_where_it_stopped(tmp_path):
    config = chat_config(tmp_path)
    export = write_export(tmp_path / "conversations.json", many_conversations("claude", 6))
    assert aokun_in_process("stats", "--config", config).returncode == 0  # the database exists
    database = sqlite3.connect(tmp_path / "data" / "aokun.db")
    with database:
        database.execute("CREATE TRIGGER full BEFORE INSERT ON documents WHEN (SELECT COUNT(*) FROM documents) >= 4 "
                         "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    stopped = aokun_in_process("import", export, "--config", config)
    assert stopped.returncode == 2, stopped.stdout + stopped.stderr
    assert "imported 4, already present 0, skipped 0 before stopping; run the import again" in stopped.stdout
    positions = list((tmp_path / "data" / "imports").iterdir())
    assert len(positions) == 1 and json.loads(positions[0].read_text())["done"] == 4
    with database:
        database.execute("DROP TRIGGER full")
    database.close()

    resumed = aokun_in_process("import", export, "--progress", "--config", config)
    assert resumed.returncode == 0, resumed.stderr
    out = resumed.stdout.strip().splitlines()
    assert out[0].startswith("resuming after conversation 4, where an earlier import of conversations.json stopped")
    # Only what came after the position was read: the four before are not counted again.
    assert out[-1].startswith("imported 2, already present 0, skipped 0 (2 conversations, claude")
    assert "6 conversations" in resumed.stderr  # the progress bar counts conversations and bytes
    assert not any((tmp_path / "data" / "imports").iterdir())  # read to its end: no position left
    texts = [t for (t,) in db_rows(config, "SELECT text FROM documents ORDER BY id")]
    assert [t.split("] ", 1)[1].split("\n")[0] for t in texts] == [f"Conversation {i} (Claude)" for i in range(6)]
    assert last_line(aokun_in_process("import", export, "--config", config)).startswith(
        "imported 0, already present 6, skipped 0")


def test_an_export_larger_than_a_read_is_read_whole_and_from_any_conversation_on(tmp_path):
    """Conversations (Chinese ones too: characters of three bytes) cut by the reads, and a
    reading started at a conversation's end offset, as a resumed import starts."""
    conversations = many_conversations("chatgpt", 400)
    export = write_export(tmp_path / "conversations.json", conversations)
    assert export.stat().st_size > 3 * CHUNK
    with export.open("rb") as handle:
        items = list(array_items(handle))
        assert [i.value for i in items] == conversations and [i.index for i in items] == list(range(400))
        for k in (0, 57, 211, 398, 399):
            rest = list(array_items(handle, items[k].end, k + 1))
            assert [i.value for i in rest] == conversations[k + 1:]
            assert [i.index for i in rest] == list(range(k + 1, 400))
