"""summarize_memory through the official MCP client against the real front built in this process: the rules
provider on a Chinese and an English conversation, storing once, and the llm provider's token
counts in memory_stats (against a real local HTTP chat endpoint)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from fake_chat import COMPLETION_TOKENS, PROMPT_TOKENS, FakeChatServer, memory_reply
from helpers import db_rows, front_in_process, write_config

EN = [
    {"speaker": "Caroline", "text": "I adopted a cat named Luna from the shelter last week, and she already "
                                    "sleeps on my bed every night.", "time": "2023-05-08T13:56:00"},
    {"speaker": "Melanie", "text": "Oh wow, congratulations! How is she doing?", "time": "2023-05-08T13:57:00"},
    {"speaker": "Caroline", "text": "I am taking her to the vet tomorrow morning for her first checkup and "
                                    "vaccinations.", "time": "2023-05-08T13:58:00"},
    {"speaker": "Melanie", "text": "I love hiking in the mountains with my kids; we go up to the lake almost "
                                   "every weekend in summer.", "time": "2023-05-08T13:59:00"},
    {"speaker": "Caroline", "text": "Haha, nice!", "time": "2023-05-08T14:00:00"},
]
ZH = [
    {"speaker": "小明", "text": "我上个月搬到了杭州。", "time": "2024-03-06T20:00:00"},
    {"speaker": "小红", "text": "真的吗？那太好了！", "time": "2024-03-06T20:01:00"},
    {"speaker": "小明", "text": "我明天要去西湖边跑步。", "time": "2024-03-06T20:02:00"},
    {"speaker": "小红", "text": "我对花生过敏。", "time": "2024-03-06T20:03:00"},
    {"speaker": "小明", "text": "哈哈，好的。", "time": "2024-03-06T20:04:00"},
]
# No times: the conversation is taken to happen when the tool is called.
TRANSCRIPT = """Caroline: I am taking my cat Luna to the vet tomorrow morning for her first checkup and vaccinations.
Melanie: Good luck!
Melanie: I love hiking in the mountains with my kids; we go up to the lake almost every weekend in summer.
"""


def facts_with(memory: dict, *words: str) -> list[str]:
    return [f for f in memory["key_facts"] if all(w in f for w in words)]


def has_date(fact: str, year: int, month: int, day: int) -> bool:
    """The fact names the calendar date, in one of the ways a date is written."""
    forms = (f"{year}-{month:02d}-{day:02d}", f"{day} {MONTHS[month - 1]} {year}",
             f"{MONTHS[month - 1]} {day}, {year}", f"{year}年{month}月{day}日")
    return any(form in fact for form in forms)


MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")


def test_english_conversation_by_rules(session):
    memory = session.ok("summarize_memory", {"conversation": EN})
    assert memory["provider"] == "rules" and memory["warnings"] == []
    assert {"Caroline", "Melanie"} <= set(memory["participants"])
    assert memory["topics"] and any(w in " ".join(memory["topics"]).lower() for w in ("cat", "vet", "hiking"))
    # One key fact per stated fact, the speaker as subject; small talk is none.
    assert len(facts_with(memory, "Caroline", "adopted a cat")) == 1
    assert len(facts_with(memory, "Melanie", "hiking")) == 1
    plan = facts_with(memory, "Caroline", "vet")
    assert len(plan) == 1 and has_date(plan[0], 2023, 5, 9)
    # Hiking with the kids and the lake every weekend are two facts (two clauses, cut at ";").
    assert len(memory["key_facts"]) == 4
    assert "Melanie loves hiking in the mountains with Melanie's kids." in memory["key_facts"]
    assert not any(f.startswith("I ") or "congratulations" in f.lower() or "Haha" in f
                   for f in memory["key_facts"])
    assert memory["summary"] and "Luna" in memory["summary"]
    assert 0.0 <= memory["importance"] <= 1.0 and memory["sentiment"] in ("positive", "neutral", "negative")
    assert "id" not in memory or memory["id"] is None  # not stored


def test_chinese_conversation_by_rules(session):
    memory = session.ok("summarize_memory", {"conversation": ZH})
    assert memory["provider"] == "rules"
    assert {"小明", "小红"} <= set(memory["participants"])
    assert any("杭州" in t or "西湖" in t or "跑步" in t or "花生" in t for t in memory["topics"])
    assert len(facts_with(memory, "小明", "杭州")) == 1
    assert len(facts_with(memory, "小红", "花生")) == 1
    plan = facts_with(memory, "小明", "跑步")
    assert len(plan) == 1 and has_date(plan[0], 2024, 3, 7)
    assert len(memory["key_facts"]) == 3
    assert not any(f.startswith("我") or "哈哈" in f for f in memory["key_facts"])


def test_transcript_string_happens_now(session):
    before = datetime.now(timezone.utc)
    memory = session.ok("summarize_memory", {"conversation": TRANSCRIPT})
    after = datetime.now(timezone.utc)
    assert {"Caroline", "Melanie"} <= set(memory["participants"])
    plan = facts_with(memory, "Caroline", "vet")
    tomorrow = {(moment + timedelta(days=1)).date() for moment in (before, after)}
    assert len(plan) == 1 and any(has_date(plan[0], d.year, d.month, d.day) for d in tomorrow), plan
    assert facts_with(memory, "Melanie", "hiking") and not facts_with(memory, "Good luck")


def test_store_memorizes_once_and_recall_finds_it(session, config_path):
    args = {"conversation": EN, "persona_id": "caroline", "session_id": "s-1", "store": True}
    first = session.ok("summarize_memory", args)
    assert first["stored"] is True and first["status"] == "accepted" and isinstance(first["id"], int)
    assert first["persona_id"] == "caroline" and first["session_id"] == "s-1"
    # The conversation's last turn is when the memory happened.
    assert first["text"] == f"[2023-05-08 14:00] {first['summary']}"
    row = db_rows(config_path, "SELECT key_facts, participants, original_time, source_hash FROM documents"
                               " WHERE id = ?", (first["id"],))[0]
    assert json.loads(row[0]) == first["key_facts"] and json.loads(row[1]) == first["participants"]
    assert row[2].startswith("2023-05-08T14:00") and len(row[3]) == 64

    again = session.ok("summarize_memory", args)
    assert again["stored"] is False and again["id"] == first["id"] and again["status"] == "already stored"
    assert db_rows(config_path, "SELECT COUNT(*) FROM documents") == [(1,)]

    hits = session.ok("recall", {"query": "Caroline's cat Luna", "persona_id": "caroline"})["results"]
    assert hits and hits[0]["id"] == first["id"]
    # Another persona's copy of the conversation is that persona's own memory.
    other = session.ok("summarize_memory", {**args, "persona_id": "melanie"})
    assert other["stored"] is True and other["id"] != first["id"]


def test_listed_only_when_exposed_and_bad_input_is_one_line(session, tmp_path):
    default = tmp_path / "default"  # tmp_path holds the fixture's config
    default.mkdir()
    with front_in_process(write_config(default)) as s:
        assert "summarize_memory" not in s.tool_names()
        assert "is not enabled" in s.error("summarize_memory", {"conversation": "A: hi"})
    assert "must be a list of turns" in session.error("summarize_memory", {"conversation": 42})
    assert "conversation is empty" in session.error("summarize_memory", {"conversation": []})
    message = session.error("summarize_memory", {"conversation": [{"speaker": "Ann"}]})
    assert message == "conversation[0].text must be a string"
    assert "ISO-8601" in session.error("summarize_memory", {"conversation": [{"text": "hi", "time": "soon"}]})
    assert "provider" in session.error("summarize_memory", {"conversation": "A: hi", "provider": "gpt"})
    folder = tmp_path / "exposed"
    folder.mkdir()
    config = write_config(folder, server={"exposed_tools": ["memorize", "summarize_memory"]})
    with front_in_process(config) as s:
        tools = {t.name: t for t in s._portal.call(s.client.list_tools).tools}
        assert sorted(tools) == ["memorize", "summarize_memory"]
        schema = tools["summarize_memory"].input_schema["properties"]["conversation"]
        assert {"array", "string"} == {branch["type"] for branch in schema["anyOf"]}


@pytest.mark.slow
def test_llm_tokens_in_memory_stats(tmp_path):
    reply = {"summary": "Caroline adopted a cat named Luna.", "topics": ["cats"],
             "participants": ["Caroline", "Melanie"], "key_facts": ["Caroline adopted a cat named Luna."],
             "sentiment": "positive", "importance": 0.7, "persona_summary": None}
    with FakeChatServer(memory_reply(reply)) as chat:
        config = write_config(tmp_path, summarizer={"provider": "llm", "base_url": chat.base_url,
                                                    "model": "fake-chat", "api_key": "k"},
                              server={"exposed_tools": ["summarize_memory", "memory_stats"]})
        with front_in_process(config) as s:
            before = s.ok("memory_stats")["summarizer"]
            assert before == {"provider": "llm", "model": "fake-chat", "usage": {}}
            memory = s.ok("summarize_memory", {"conversation": EN})
            assert memory["provider"] == "llm" and memory["key_facts"] == reply["key_facts"]
            # The rules on request: no model call, nothing counted.
            assert s.ok("summarize_memory", {"conversation": EN, "provider": "rules"})["provider"] == "rules"
            stats = s.ok("memory_stats")["summarizer"]
    assert len(chat.requests) == 1
    assert stats["usage"] == {"fake-chat": {"calls": 1, "prompt_tokens": PROMPT_TOKENS,
                                            "completion_tokens": COMPLETION_TOKENS, "failures": 0}}
