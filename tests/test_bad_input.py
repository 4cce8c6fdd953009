"""Bad input gets a tool error that names the problem, and nothing is written.

Hostile queries never raise an FTS5 error or act as an operator.
"""

from __future__ import annotations

import pytest

from aokun_server.app import build_front
from helpers import db_rows, mcp_session, write_config
from shared.config import load_config

BAD_CALLS = [
    ("memorize", {"content": 42}, "content"),
    ("memorize", {"content": ""}, "content is empty"),
    ("memorize", {"content": "  \n\t "}, "content is empty"),
    ("memorize", {"content": "x" * 20_001}, "limit is 20000"),
    ("memorize", {"content": "ok", "metadata": {"importance": 1.5}}, "importance"),
    ("memorize", {"content": "ok", "metadata": {"importance": -0.1}}, "importance"),
    ("memorize", {"content": "ok", "metadata": {"importance": "high"}}, "importance"),
    ("memorize", {"content": "ok", "metadata": {"colour": "red"}}, "colour"),
    ("memorize", {"content": "ok", "metadata": {"sentiment": "angry"}}, "sentiment"),
    ("memorize", {"content": "ok", "metadata": {"topics": "food"}}, "topics"),
    ("memorize", {"content": "ok", "metadata": {"topics": ["food", 3]}}, "topics"),
    ("memorize", {"content": "ok", "metadata": {"topics": ["  "]}}, "topics holds an empty string"),
    ("memorize", {"content": "ok", "metadata": {"pinned": "yes"}}, "pinned"),
    ("memorize", {"content": "ok", "metadata": {"original_time": "last tuesday"}}, "original_time must be an ISO-8601"),
    ("memorize", {"content": "ok", "metadata": {"persona_id": ""}}, "persona_id"),
    ("memorize", {"content": "ok", "metadata": "not an object"}, "metadata"),
    ("recall", {"query": ""}, "query is empty"),
    ("recall", {"query": "x", "k": 0}, "k must be at least 1"),
    ("recall", {"query": "x", "k": "five"}, "k"),
    ("recall", {"query": "x", "persona_id": " "}, "persona_id is empty"),
    ("list_memories", {"limit": 0}, "limit must be between"),
    ("list_memories", {"offset": -1}, "offset must be 0 or more"),
    ("edit_memory", {"id": 999}, "nothing to change"),
    ("edit_memory", {"id": 999, "content": "new"}, "no memory with id 999"),
    ("edit_memory", {"id": "one", "content": "new"}, "id"),
    ("edit_memory", {"id": 1, "content": ""}, "content is empty"),
    ("edit_memory", {"id": 1, "metadata": {"importance": 2}}, "importance"),
    ("delete_memory", {"id": 999}, "no memory with id 999"),
    ("pin_memory", {"id": 999}, "no memory with id 999"),
]


def test_bad_calls_fail_clearly_and_write_nothing(stdio, config_path):
    keep = stdio.ok("memorize", {"content": "the one memory that must survive"})
    before = db_rows(config_path, "SELECT id, text, importance, update_time FROM documents")
    for name, arguments, expected in BAD_CALLS:
        message = stdio.error(name, arguments)
        assert expected in message, (name, arguments, message)
    assert db_rows(config_path, "SELECT id, text, importance, update_time FROM documents") == before
    assert db_rows(config_path, "SELECT COUNT(*) FROM documents_fts") == [(1,)]
    assert stdio.ok("recall", {"query": "survive"})["results"][0]["id"] == keep["id"]


HOSTILE_QUERIES = [
    '"', '""', '"unbalanced', "peanut*", "*", "NEAR(peanut allergy)", "NEAR(", "peanut AND", "AND",
    "OR OR OR", "NOT peanut", "-peanut", "tokens:peanut", "col:x", "(peanut", "peanut)", "((()))",
    "^peanut", "peanut + allergy", "{tokens}: peanut", "😀🥜", "🥜 花生 🥜", "'; DROP TABLE documents; --",
    "\x00", "a" * 10_000, "花生" * 5_000, "peanut " * 1_500,
]


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """The real front built in this process (the official client connects in-process)."""
    front = build_front(load_config(write_config(tmp_path_factory.mktemp("hostile"))))
    with mcp_session(front.server) as session:
        yield session


@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=lambda q: repr(q[:24]))
def test_hostile_query_never_breaks_match(query, in_process):
    s = in_process
    total = s.ok("memory_stats")["documents"]["total"]
    mid = s.ok("memorize", {"content": "我对花生过敏 I have a peanut allergy"})["id"]
    results = s.ok("recall", {"query": query})["results"]
    assert all(r["text"] == "我对花生过敏 I have a peanut allergy" for r in results)
    assert s.ok("memory_stats")["documents"]["total"] == total + 1
    s.ok("delete_memory", {"id": mid})


def test_hostile_terms_are_searched_as_words(tmp_path):
    front = build_front(load_config(write_config(tmp_path)))
    with mcp_session(front.server) as s:
        mid = s.ok("memorize", {"content": "peanut allergy"})["id"]
        for query in ("NEAR(peanut", "peanut*", "-peanut", "tokens:peanut", "NOT peanut"):
            assert [r["id"] for r in s.ok("recall", {"query": query})["results"]] == [mid], query


def test_lone_surrogates_are_refused(tmp_path):
    # The client cannot encode a lone surrogate as UTF-8 JSON, so speak to the server in-process.
    front = build_front(load_config(write_config(tmp_path)))
    with mcp_session(front.server) as s:
        assert "lone UTF-16 surrogate" in s.error("memorize", {"content": "bad \ud800 text"})
        assert "lone UTF-16 surrogate" in s.error(
            "memorize", {"content": "ok", "metadata": {"topics": ["\udfff"]}})
        assert "lone UTF-16 surrogate" in s.error("recall", {"query": "\ud83d"})
        assert s.ok("memory_stats")["documents"]["total"] == 0
