"""Bad input gets a one-line tool error that names the problem, and nothing is written.

Hostile queries never raise an FTS5 error or act as an operator; unexpected exceptions reach
the client as one line; unreadable stdio lines get a JSON-RPC error instead of silence.
"""

from __future__ import annotations

import sqlite3

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from aokun_server.server import AokunMCPServer
from helpers import db_rows, front_in_process, mcp_session, write_config
from raw_stdio import INITIALIZE, RawStdio
from shared.config import ALL_TOOLS
from shared.store.model.documents import unmarked

BIG = 2**63  # one past SQLite's largest integer
MB = "x" * 1_000_000

# (tool, arguments, text the message must contain; the whole message where it is exact)
BAD_CALLS = [
    ("memorize", {"content": 42}, "content: must be a string (got 42)"),
    ("memorize", {}, "content: is required"),
    ("memorize", {"content": ""}, "content is empty"),
    ("memorize", {"content": "  \n\t "}, "content is empty"),
    ("memorize", {"content": "x" * 20_001}, "limit is 20000"),
    ("memorize", {"content": "ok", "metadata": {"importance": 1.5}},
     "metadata.importance: must be at most 1 (got 1.5)"),
    ("memorize", {"content": "ok", "metadata": {"importance": -0.1}},
     "metadata.importance: must be at least 0 (got -0.1)"),
    ("memorize", {"content": "ok", "metadata": {"importance": "high"}},
     'metadata.importance: must be a number (got "high")'),
    ("memorize", {"content": "ok", "metadata": {"colour": "red"}},
     "metadata.colour: is not an accepted key (accepted: topics, participants, key_facts,"),
    ("memorize", {"content": "ok", "metadata": {"sentiment": "angry"}},
     "metadata.sentiment: must be one of 'positive', 'neutral' or 'negative' (got \"angry\")"),
    ("memorize", {"content": "ok", "metadata": {"topics": "food"}},
     'metadata.topics: must be a list (got "food")'),
    ("memorize", {"content": "ok", "metadata": {"topics": ["food", 3]}},
     "metadata.topics[1]: must be a string (got 3)"),
    ("memorize", {"content": "ok", "metadata": {"topics": ["  "]}},
     "metadata.topics[0]: is an empty string"),
    ("memorize", {"content": "ok", "metadata": {"pinned": "yes"}},
     'metadata.pinned: must be true or false (got "yes")'),
    ("memorize", {"content": "ok", "metadata": {"original_time": "last tuesday"}},
     "metadata.original_time: must be an ISO-8601 date or date-time"),
    # A time outside the years 1900-2200 is a typo or a placeholder: refused at the door, by
    # every tool that takes one (a memory dated 9999-12-31 once failed its whole atoms batch).
    ("memorize", {"content": "I fly to Oslo tomorrow", "metadata": {"original_time": "9999-12-31"}},
     "original_time: 9999-12-31T00:00:00 is out of range: give a time in the years 1900 to 2200 (UTC)"),
    ("memorize", {"content": "ok", "metadata": {"original_time": "1800-01-01T08:00:00Z"}},
     "original_time: 1800-01-01T08:00:00+00:00 is out of range: give a time in the years 1900 to 2200"),
    ("memorize", {"content": "ok", "metadata": {"original_time": "2200-12-31T23:00:00-02:00"}},
     "original_time: 2200-12-31T23:00:00-02:00 is out of range"),
    ("edit_memory", {"id": 1, "metadata": {"original_time": "9999-12-31"}},
     "original_time: 9999-12-31T00:00:00 is out of range: give a time in the years 1900 to 2200"),
    ("summarize_memory", {"conversation": [{"speaker": "Ann", "text": "see you tomorrow",
                                            "time": "9999-12-31T10:00:00"}], "store": True},
     "conversation: turn 1's time: 9999-12-31T10:00:00 is out of range"),
    ("summarize_memory", {"conversation": [{"speaker": "Ann", "text": "see you tomorrow",
                                            "time": "1800-01-01"}]},
     "conversation: turn 1's time: 1800-01-01T00:00:00 is out of range"),
    # The word a host sends for a missing value is no persona's name, written or read.
    ("memorize", {"content": "ok", "metadata": {"persona_id": "null"}},
     'persona_id: "null" is the word for no value, not a name: leave the key out'),
    ("memorize", {"content": "ok", "metadata": {"session_id": "None"}},
     'session_id: "None" is the word for no value, not a name'),
    ("edit_memory", {"id": 1, "metadata": {"persona_id": "undefined"}},
     'persona_id: "undefined" is the word for no value, not a name'),
    ("summarize_memory", {"conversation": "Ann: hi", "persona_id": "null", "store": True},
     'persona_id: "null" is the word for no value, not a name'),
    ("recall", {"query": "x", "persona_id": "null"}, 'persona_id: "null" is the word for no value'),
    ("search_atoms", {"query": "x", "persona_id": " NULL "}, 'persona_id: " NULL " is the word for no value'),
    ("list_memories", {"persona_id": "none"}, 'persona_id: "none" is the word for no value'),
    ("memorize", {"content": "ok", "metadata": {"persona_id": ""}},
     "metadata.persona_id: must not be empty"),
    ("memorize", {"content": "ok", "metadata": {"persona_id": "p" * 201}},
     "metadata.persona_id: must be at most 200 characters (got 201)"),
    ("memorize", {"content": "ok", "metadata": "not an object"},
     'metadata: must be an object (got "not an object")'),
    # Item sizes and counts (a 1 MB key fact once became a 1 M-character atom).
    ("memorize", {"content": "ok", "metadata": {"key_facts": ["fine", "also fine", MB]}},
     "metadata.key_facts[2]: must be at most 1000 characters (got 1000000)"),
    ("memorize", {"content": "ok", "metadata": {"key_facts": ["k" * 1001]}},
     "metadata.key_facts[0]: must be at most 1000 characters (got 1001)"),
    ("memorize", {"content": "ok", "metadata": {"topics": ["t" * 201]}},
     "metadata.topics[0]: must be at most 200 characters (got 201)"),
    ("memorize", {"content": "ok", "metadata": {"participants": ["Ann", "p" * 201]}},
     "metadata.participants[1]: must be at most 200 characters (got 201)"),
    ("memorize", {"content": "ok", "metadata": {"key_facts": ["fact"] * 65}},
     "metadata.key_facts: must have at most 64 items (got 65)"),
    ("memorize", {"content": "ok", "metadata": {"persona_summary": "s" * 4001}},
     "metadata.persona_summary: must be at most 4000 characters (got 4001)"),
    ("recall", {"query": ""}, "query is empty"),
    ("recall", {"query": "x", "k": 0}, "k: must be between 1 and 15 (got 0)"),
    ("recall", {"query": "x", "k": "five"}, 'k: must be an integer (got "five")'),
    ("recall", {"query": "x", "k": 2.0}, "k: must be an integer (got 2.0)"),
    ("recall", {"query": "x", "k": BIG}, f"k: must be between 1 and 15 (got {BIG})"),
    ("recall", {"query": "x", "persona": "me"}, 'unknown argument "persona" (recall takes: query,'),
    ("recall", {"query": "x", "explain": "yes"}, 'explain: must be true or false (got "yes")'),
    ("recall", {"query": "x", "persona_id": " "}, "persona_id is empty"),
    ("search_atoms", {"query": "x", "k": 10**30}, f"k: must be between 1 and 15 (got {10**30})"),
    ("search_atoms", {"query": "x", "types": ["nope"]}, "types[0]: must be one of 'episodic',"),
    ("list_memories", {"limit": 0}, "limit: must be at least 1 (got 0)"),
    ("list_memories", {"limit": BIG}, f"limit: must be at most 200 (got {BIG})"),
    ("list_memories", {"offset": -1}, "offset: must be at least 0 (got -1)"),
    ("list_memories", {"offset": BIG}, f"offset: must be at most {BIG - 1} (got {BIG})"),
    ("edit_memory", {"id": 999}, "nothing to change"),
    ("edit_memory", {"id": 999, "content": "new"}, "no memory with id 999"),
    ("edit_memory", {"id": "one", "content": "new"}, 'id: must be an integer (got "one")'),
    ("edit_memory", {"id": True, "content": "new"}, "id: must be an integer (got true)"),
    ("edit_memory", {"id": 1.0, "content": "new"}, "id: must be an integer (got 1.0)"),
    ("edit_memory", {"id": "1.5", "content": "new"}, 'id: must be an integer (got "1.5")'),
    ("edit_memory", {"id": BIG, "content": "new"}, f"id: must be at most {BIG - 1} (got {BIG})"),
    ("edit_memory", {"id": 1, "content": ""}, "content is empty"),
    ("edit_memory", {"id": 1, "metadata": {"importance": 2}},
     "metadata.importance: must be at most 1 (got 2)"),
    ("edit_memory", {"id": 1, "metadata": {"key_facts": [MB]}},
     "metadata.key_facts[0]: must be at most 1000 characters (got 1000000)"),
    ("delete_memory", {"id": 999}, "no memory with id 999"),
    ("delete_memory", {"id": True}, "id: must be an integer (got true)"),
    ("delete_memory", {"id": 1.0}, "id: must be an integer (got 1.0)"),
    ("delete_memory", {"id": "one"}, 'id: must be an integer (got "one")'),
    ("delete_memory", {"id": 0}, "id: must be at least 1 (got 0)"),
    ("delete_memory", {"id": BIG}, f"id: must be at most {BIG - 1} (got {BIG})"),
    ("delete_memory", {"id": -BIG * 4}, f"id: must be at least 1 (got {-BIG * 4})"),
    ("pin_memory", {"id": 999}, "no memory with id 999"),
    ("pin_memory", {"id": True}, "id: must be an integer (got true)"),
    ("pin_memory", {"id": 1, "pinned": "false"}, 'pinned: must be true or false (got "false")'),
    ("pin_memory", {"id": 1, "pinned": 0}, "pinned: must be true or false (got 0)"),
]

STORED = {  # what a failed call must leave exactly as it was
    "documents": "SELECT id, text, importance, pinned, update_time FROM documents",
    "fts": "SELECT COUNT(*) FROM documents_fts",
    "stages": "SELECT memory_id, stage, status, content_hash FROM memory_stages ORDER BY 1, 2",
}


def stored(config_path) -> dict:
    return {name: db_rows(config_path, sql) for name, sql in STORED.items()}


def assert_one_line(message: str) -> None:
    assert "\n" not in message, message
    assert "errors.pydantic.dev" not in message and "validation error" not in message, message
    assert not message.startswith("Error executing tool"), message
    assert len(message) <= 1000, message[:200]


def test_bad_calls_fail_clearly_and_write_nothing(session, config_path):
    keep = session.ok("memorize", {"content": "the one memory that must survive"})
    assert keep["id"] == 1  # the id the edit / delete / pin cases aim at
    before = stored(config_path)
    assert len(before["documents"]) == 1 and before["fts"] == [(1,)]
    for name, arguments, expected in BAD_CALLS:
        message = session.error(name, arguments)
        assert expected in message, (name, str(arguments)[:80], message)
        assert_one_line(message)
        assert stored(config_path) == before, (name, str(arguments)[:80])
    assert session.ok("recall", {"query": "survive", "min_score": 0})["results"][0]["id"] == keep["id"]


def test_validation_message_is_exactly_one_line(session):
    assert session.error("delete_memory", {"id": True}) == "id: must be an integer (got true)"
    assert session.error("memorize", {"content": "ok", "metadata": {"importance": 1.5}}) == \
        "metadata.importance: must be at most 1 (got 1.5)"
    # Several problems in one call: each named, on one line.
    message = session.error("memorize", {"content": 7, "metadata": {"topics": ["t" * 201],
                                                                 "importance": 3}})
    assert_one_line(message)
    for part in ("content: must be a string (got 7)",
                 "metadata.topics[0]: must be at most 200 characters (got 201)",
                 "metadata.importance: must be at most 1 (got 3)"):
        assert part in message, message


def test_item_limits_are_inclusive(session, config_path):
    metadata = {"key_facts": ["k" * 1000] * 64, "topics": ["t" * 200] * 64,
                "participants": ["p" * 200] * 64}
    mid = session.ok("memorize", {"content": "at the limits", "metadata": metadata})["id"]
    row = db_rows(config_path, "SELECT id FROM documents WHERE id = ?", (mid,))
    assert row == [(mid,)]


def _crashing_server() -> AokunMCPServer:
    server = AokunMCPServer("crash-test", exposed_tools=("crash", "refuse", "bad_result"))

    @server.tool()
    def crash() -> str:
        raise sqlite3.OperationalError("disk I/O error\nwhile writing page 7")

    @server.tool()
    def refuse() -> str:
        raise ToolError("nothing to change:\n give content and/or metadata")

    @server.tool()
    def bad_result() -> int:
        return "not a number"  # type: ignore[return-value]

    return server


def test_unexpected_exceptions_reach_the_client_as_one_line():
    with mcp_session(_crashing_server()) as s:
        # A bug is an internal error: its type, not its text (that is in the server log).
        assert s.error("crash") == "crash failed: internal error (OperationalError); see the server log"
        assert s.error("refuse") == "nothing to change: give content and/or metadata"
        message = s.error("bad_result")
        assert message == "bad_result failed: internal error (ValidationError); see the server log"
        assert_one_line(message)
        assert s.error("no_such_tool") == "Unknown tool: no_such_tool"


HOSTILE_QUERIES = [
    '"', '""', '"unbalanced', "peanut*", "*", "NEAR(peanut allergy)", "NEAR(", "peanut AND", "AND",
    "OR OR OR", "NOT peanut", "-peanut", "tokens:peanut", "col:x", "(peanut", "peanut)", "((()))",
    "^peanut", "peanut + allergy", "{tokens}: peanut", "😀🥜", "🥜 花生 🥜", "'; DROP TABLE documents; --",
    "\x00", "a" * 10_000, "花生" * 5_000, "peanut " * 1_500,
]


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """The real front built in this process (the official client connects in-process)."""
    with front_in_process(write_config(tmp_path_factory.mktemp("hostile"),
                                       server={"exposed_tools": list(ALL_TOOLS)})) as session:
        yield session


@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=lambda q: repr(q[:24]))
def test_hostile_query_never_breaks_match(query, in_process):
    s = in_process
    total = s.ok("memory_stats")["documents"]["total"]
    mid = s.ok("memorize", {"content": "我对花生过敏 I have a peanut allergy"})["id"]
    results = s.ok("recall", {"query": query})["results"]
    assert all(unmarked(r["text"]) == "我对花生过敏 I have a peanut allergy" for r in results)
    assert s.ok("memory_stats")["documents"]["total"] == total + 1
    s.ok("delete_memory", {"id": mid})


def test_hostile_terms_are_searched_as_words(tmp_path):
    with front_in_process(write_config(tmp_path)) as s:
        mid = s.ok("memorize", {"content": "peanut allergy"})["id"]
        for query in ("NEAR(peanut", "peanut*", "-peanut", "tokens:peanut", "NOT peanut"):
            assert [r["id"] for r in s.ok("recall", {"query": query, "min_score": 0})["results"]] == [mid], query


def test_lone_surrogates_are_refused(tmp_path):
    # The client cannot encode a lone surrogate as UTF-8 JSON, so speak to the server in-process.
    with front_in_process(write_config(tmp_path, server={"exposed_tools": list(ALL_TOOLS)})) as s:
        assert "lone UTF-16 surrogate" in s.error("memorize", {"content": "bad \ud800 text"})
        assert "lone UTF-16 surrogate" in s.error(
            "memorize", {"content": "ok", "metadata": {"topics": ["\udfff"]}})
        assert "lone UTF-16 surrogate" in s.error("recall", {"query": "\ud83d"})
        assert s.ok("memory_stats")["documents"]["total"] == 0


# -- stdio lines the server cannot read ----------------------------------------------------

# (raw line, expected error code, expected reply id, text the message must contain)
UNREADABLE_LINES = [
    (b'"\\ud800"', -32700, None, "lone UTF-16 surrogate"),
    (b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memorize", '
     b'"arguments": {"content": "bad \\ud800 text"}}}', -32700, 2, "lone UTF-16 surrogate"),
    (b"\xff\xfe\x00garbage", -32700, None, "not valid UTF-8"),
    # Invalid UTF-8 inside valid JSON: the SDK would have stored "caf\ufffd" without a word.
    (b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memorize", '
     b'"arguments": {"content": "caf\xe9"}}}', -32700, 3, "byte 0xe9"),
    (b"this is not json", -32700, None, "Parse error"),
    (b'{"jsonrpc": "2.0", "id": 4, "method": "tools/l', -32700, None, "Parse error"),
    (b'{"jsonrpc": "2.0", "id": 5, "method": 5}', -32600, 5, "Invalid Request"),
    (b"[1, 2, 3]", -32600, None, "Invalid Request"),
]


@pytest.mark.slow
def test_unreadable_stdio_lines_get_a_parse_error(config_path):
    server = RawStdio(config_path)
    try:
        server.send(INITIALIZE)
        assert server.reply()["result"]["serverInfo"]["name"] == "aokun-memory"
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for raw, code, ident, text in UNREADABLE_LINES:
            server.send(raw)
            reply = server.reply(timeout=30)
            assert reply["jsonrpc"] == "2.0" and "id" in reply and reply["id"] == ident, (raw, reply)
            assert reply["error"]["code"] == code, (raw, reply)
            assert text in reply["error"]["message"], (raw, reply)
            assert "\n" not in reply["error"]["message"]
        server.send(b"")  # a blank line is not a message: no reply, and no harm
        server.send({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
        listed = server.reply()
        assert listed["id"] == 9 and "memorize" in [t["name"] for t in listed["result"]["tools"]]
        server.send({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                     "params": {"name": "memorize", "arguments": {"content": "café ☕ 咖啡"}}})
        stored = server.reply()
        assert stored["id"] == 10 and unmarked(stored["result"]["structuredContent"]["text"]) == "café ☕ 咖啡"
        assert [unmarked(t) for t, in db_rows(config_path, "SELECT text FROM documents")] == ["café ☕ 咖啡"]
    finally:
        assert server.close() == 0  # stdin closed: the server ends by itself
