"""`aokun mcp-config`: the printed block parses, and the server it describes answers the
official MCP client: over stdio launched exactly as written, over HTTP at the URL it gives."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sqlite3

import httpx2
import pytest
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from aokun_admin.commands import Admin, _with_config
from aokun_admin.mcp_config import add_parser, cmd_mcp_config, http_url
from helpers import db_rows, free_port, http_server, mcp_session, wait_for, write_config
from servers import pg_url  # noqa: F401 (the fixture)
from shared.config import load_config
from shared.errors import ConfigError


def mcp_config(capsys, *argv: str) -> tuple[dict, str]:
    """Run the subcommand as the admin CLI parses it; (the printed block, what stderr said)."""
    parser = _with_config(argparse.ArgumentParser(prog="aokun"))
    add_parser(parser.add_subparsers(dest="command", required=True), _with_config)
    args = parser.parse_args(["mcp-config", *argv])
    admin = Admin(load_config(getattr(args, "config", None)))
    try:
        assert cmd_mcp_config(admin, args) == 0
    finally:
        admin.close()
    out, err = capsys.readouterr()
    return json.loads(out), err


def claude_words(err: str) -> list[str]:
    [line] = [line.strip() for line in err.splitlines() if line.strip().startswith("claude mcp add")]
    return shlex.split(line)


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


def test_relative_config_path_becomes_absolute(tmp_path, capsys, monkeypatch):
    write_config(tmp_path)
    monkeypatch.chdir(tmp_path)
    block, _ = mcp_config(capsys, "--config", "config.yaml", "--name", "memory")
    assert block["mcpServers"]["memory"]["args"][-1] == str(tmp_path.resolve() / "config.yaml")


def test_api_keys_are_passed_as_references(tmp_path, capsys, monkeypatch):
    """A stdio child gets a minimal environment: the variable holding the embedder's key is
    named in the entry (Claude Code expands ${VAR}); its value only with --inline-secrets."""
    monkeypatch.setenv("MY_EMBED_KEY", "k-123")
    config = write_config(tmp_path, embedding={"provider": "openai", "base_url": "http://127.0.0.1:9/v1",
                                               "model": "m", "api_key_env": "MY_EMBED_KEY"})
    block, err = mcp_config(capsys, "--config", str(config))
    assert block["mcpServers"]["aokun"]["env"] == {"MY_EMBED_KEY": "${MY_EMBED_KEY}"}
    assert "k-123" not in json.dumps(block) + err
    assert ["--env", "MY_EMBED_KEY=${MY_EMBED_KEY}"] == claude_words(err)[7:9]
    block, _ = mcp_config(capsys, "--config", str(config), "--inline-secrets")
    assert block["mcpServers"]["aokun"]["env"] == {"MY_EMBED_KEY": "k-123"}


def test_no_config_file_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AOKUN_CONFIG", raising=False)
    parser = _with_config(argparse.ArgumentParser(prog="aokun"))
    add_parser(parser.add_subparsers(dest="command"), _with_config)
    with pytest.raises(ConfigError, match="no config file found: pass --config FILE"):
        cmd_mcp_config(Admin(load_config(None, env={})), parser.parse_args(["mcp-config"]))


@pytest.mark.parametrize("host, url", [
    ("127.0.0.1", "http://127.0.0.1:8000/mcp"), ("0.0.0.0", "http://127.0.0.1:8000/mcp"),
    ("::", "http://[::1]:8000/mcp"), ("::1", "http://[::1]:8000/mcp"), ("mem.local", "http://mem.local:8000/mcp"),
])
def test_http_url_is_where_a_client_reaches_the_bind_address(host, url):
    assert http_url(host, 8000) == url


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


def test_team_mode_passwords_and_a_users_token_are_passed_as_references(tmp_path, capsys, monkeypatch, pg_url):
    """In team mode the stdio child also needs the store's and the queue's passwords (when
    their URLs hold none) and, when this shell has one, the user's token."""
    monkeypatch.setenv("AOKUN_TOKEN", "tok-secret")
    config = write_config(tmp_path, storage={"backend": "postgresql", "url": pg_url},
                          queue={"backend": "redis", "url": "redis://127.0.0.1:6379/0"})
    block, err = mcp_config(capsys, "--config", str(config))
    assert block["mcpServers"]["aokun"]["env"] == {
        "AOKUN_STORAGE_PASSWORD": "${AOKUN_STORAGE_PASSWORD}", "AOKUN_QUEUE_PASSWORD": "${AOKUN_QUEUE_PASSWORD}",
        "AOKUN_TOKEN": "${AOKUN_TOKEN}"}
    assert "tok-secret" not in json.dumps(block) + err
    config = write_config(tmp_path,
                          storage={"backend": "postgresql", "url": pg_url.replace("postgres@", "postgres:pw@")},
                          queue={"backend": "redis", "url": "redis://:pw@127.0.0.1:6379/0"})
    monkeypatch.delenv("AOKUN_TOKEN")
    block, _ = mcp_config(capsys, "--config", str(config))
    assert block["mcpServers"]["aokun"]["env"] == {}


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


def test_http_entry_sends_a_users_token_from_aokun_token(tmp_path, capsys, monkeypatch):
    """A shell holding a user's token in AOKUN_TOKEN connects as that user, not with the
    admin's server.token."""
    monkeypatch.setenv("AOKUN_TOKEN", "alice-token")
    config = write_config(tmp_path, server={"token": "admin-token"})
    block, err = mcp_config(capsys, "--config", str(config), "--transport", "http")
    assert block["mcpServers"]["aokun"]["headers"] == {"Authorization": "Bearer ${AOKUN_TOKEN}"}
    assert "admin-token" not in json.dumps(block) + err and "alice-token" not in json.dumps(block) + err
    inline = mcp_config(capsys, "--config", str(config), "--transport", "http", "--inline-secrets")[0]
    assert inline["mcpServers"]["aokun"]["headers"] == {"Authorization": "Bearer alice-token"}
