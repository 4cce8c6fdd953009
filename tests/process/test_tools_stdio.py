"""aokun-server as a host starts it: a subprocess over stdio, spoken to by the official MCP
client. What each tool means is tested in-process (tests/test_tools.py); here, that the
process serves its listed tools, commits a memory before replying and recalls it."""

from __future__ import annotations

from helpers import db_rows, mcp_session, stdio_params, write_config


def test_the_stdio_process_serves_its_tools(tmp_path):
    config = write_config(tmp_path)
    with mcp_session(stdio_params(config)) as s:
        assert sorted(s.tool_names()) == ["edit_memory", "list_memories", "memorize", "recall"]
        assert s.error("memory_stats") == \
            'tool "memory_stats" is not enabled on this server (server.exposed_tools)'
        reply = s.ok("memorize", {"content": "我对花生过敏 I am allergic to peanuts"})
        # Another process sees the document as soon as the reply arrives.
        assert db_rows(config, "SELECT text FROM documents WHERE id = ?", (reply["id"],)) == [(reply["text"],)]
        assert [r["id"] for r in s.ok("recall", {"query": "花生过敏", "min_score": 0})["results"]] == [reply["id"]]
