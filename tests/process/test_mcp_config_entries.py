"""The servers `aokun mcp-config` describes answer the official MCP client: over stdio launched
exactly as the entry says (from another folder, with a PATH that leads nowhere), over HTTP at
the URL it gives, and at a running front's port when the saved port differs
(tests/test_mcp_config.py: what the printed block says)."""

from __future__ import annotations

import os
import sqlite3

import httpx2
import pytest
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from helpers import db_rows, free_port, http_server, mcp_session, wait_for, write_config
from mcp_config_cli import claude_words, mcp_config


def test_stdio_entry_starts_a_server_that_answers(tmp_path, capsys):
    # server.transport http in the file: the entry must still start a stdio server.
    config = write_config(tmp_path, server={"transport": "http"})
    block, err = mcp_config(capsys, "--config", str(config))
    entry = block["mcpServers"]["aokun"]
    assert entry["type"] == "stdio" and os.path.isabs(entry["command"]) and entry["env"] == {}
    assert entry["args"][-2:] == ["--config", str(config.resolve())]
    elsewhere = tmp_path / "host-cwd"
    elsewhere.mkdir()
    # As written, from another directory, with a PATH that leads nowhere: nothing may rely on it.
    params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                   env={**entry["env"], "PATH": "/nonexistent"}, cwd=elsewhere)
    with mcp_session(params) as s:
        stored = s.ok("memorize", {"content": "the host started me from mcp-config"})
        assert s.ok("recall", {"query": "mcp-config"})["results"][0]["id"] == stored["id"]
    assert db_rows(config, "SELECT id FROM documents") == [(stored["id"],)]  # the configured store
    assert claude_words(err) == ["claude", "mcp", "add", "--transport", "stdio", "--scope", "user",
                                 "aokun", "--", entry["command"], *entry["args"]]


@pytest.mark.slow
def test_http_entry_reaches_the_configured_server(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("AOKUN_SERVER_TOKEN", raising=False)
    port = free_port()
    config = write_config(tmp_path, server={"host": "127.0.0.1", "port": port, "token": "t0k-en"})
    block, err = mcp_config(capsys, "--config", str(config), "--transport", "http")
    entry = block["mcpServers"]["aokun"]
    assert entry == {"type": "http", "url": f"http://127.0.0.1:{port}/mcp",
                     "headers": {"Authorization": "Bearer ${AOKUN_SERVER_TOKEN}"}}
    assert "t0k-en" not in err and "--inline-secrets" in err  # says how to get a ready value
    assert claude_words(err) == ["claude", "mcp", "add", "--transport", "http", "--scope", "user", "aokun",
                                 entry["url"], "--header", "Authorization: Bearer ${AOKUN_SERVER_TOKEN}"]
    inline = mcp_config(capsys, "--config", str(config), "--transport", "http", "--inline-secrets")[0]
    headers = inline["mcpServers"]["aokun"]["headers"]
    assert headers == {"Authorization": "Bearer t0k-en"}
    with http_server(config, port) as served:
        assert served == entry["url"]
        client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
        with mcp_session(streamable_http_client(entry["url"], http_client=client)) as s:
            assert s.ok("memorize", {"content": "reached through mcp-config"})["status"] == "accepted"


def front_endpoints(config) -> list:
    """The fronts' endpoints; none while the starting front has not yet migrated the store
    (the fronts table may stand there without its endpoint column for a moment)."""
    try:
        return db_rows(config, "SELECT endpoint FROM fronts")
    except sqlite3.OperationalError:
        return []


@pytest.mark.slow
def test_http_entry_names_the_running_front_when_a_saved_port_differs(tmp_path, capsys, monkeypatch):
    """server.port saved after the front started (a restart-only key): the entry reaches the
    front that runs, and stderr says in one line which port was written and why."""
    monkeypatch.delenv("AOKUN_SERVER_TOKEN", raising=False)
    monkeypatch.delenv("AOKUN_TOKEN", raising=False)
    running, saved = free_port(), free_port()
    config = write_config(tmp_path, server={"port": running})
    with http_server(config, running) as served:
        wait_for(lambda: front_endpoints(config) == [(served,)], 30,
                 what="the front's heartbeat with its endpoint")
        block, err = mcp_config(capsys, "--config", str(config), "--transport", "http")
        assert block["mcpServers"]["aokun"]["url"] == served and "running front" not in err
        write_config(tmp_path, server={"port": saved})  # as the panel saves it
        block, err = mcp_config(capsys, "--config", str(config), "--transport", "http")
        assert block["mcpServers"]["aokun"]["url"] == served
        [note] = [line for line in err.splitlines() if "running front" in line]
        assert note == (f"note: the running front listens at {served}, not at the saved server.host/port "
                        f"(http://127.0.0.1:{saved}/mcp), which it takes at its restart: wrote {served}")
        with mcp_session(block["mcpServers"]["aokun"]["url"]) as s:
            assert s.ok("memorize", {"content": "reached at the running port"})["status"] == "accepted"
    # No front left: the saved port, and nothing said about a running one.
    block, err = mcp_config(capsys, "--config", str(config), "--transport", "http")
    assert block["mcpServers"]["aokun"]["url"] == f"http://127.0.0.1:{saved}/mcp" and "running front" not in err
