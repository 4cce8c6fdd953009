"""`aokun mcp-config`: the printed block parses and says what a host needs: the config's
absolute path, secrets as references (their values only when asked), a user's token, the URL a
client reaches (tests/process/test_mcp_config_entries.py: the servers it describes answer)."""

from __future__ import annotations

import argparse
import json

import pytest

from aokun_admin.commands import Admin, _with_config
from aokun_admin.mcp_config import add_parser, cmd_mcp_config, http_url
from helpers import write_config
from mcp_config_cli import claude_words, mcp_config
from servers import pg_url  # noqa: F401 (the fixture)
from shared.config import load_config
from shared.errors import ConfigError


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
