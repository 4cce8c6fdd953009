"""The front over streamable HTTP, with and without a bearer token."""

from __future__ import annotations

import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from helpers import aokun_in_process, free_port, http_server, leaves, mcp_session, write_config
from users_helpers import add_user


def test_http_tools_roundtrip(tmp_path):
    config = write_config(tmp_path)
    with http_server(config, free_port()) as url, mcp_session(url) as s:
        assert sorted(s.tool_names()) == ["edit_memory", "list_memories", "memorize", "recall"]
        mid = s.ok("memorize", {"content": "我对花生过敏，去年在杭州体检时发现的"})["id"]
        assert s.ok("recall", {"query": "花生过敏"})["results"][0]["id"] == mid
        assert "importance" in s.error("memorize", {"content": "x", "metadata": {"importance": 1.5}})


@pytest.fixture
def token_server(tmp_path):
    config = write_config(tmp_path, server={"token": "s3cret-token"})
    with http_server(config, free_port()) as url:
        yield url


def test_token_is_required(token_server):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
        response = httpx.post(token_server, headers={**headers, "Content-Type": "application/json",
                                                     "Accept": "application/json, text/event-stream"},
                              json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"].startswith("Bearer")
    with pytest.raises(Exception):  # noqa: B017 - however the client words a refused token
        with mcp_session(token_server) as s:
            s.tool_names()


def test_token_grants_access(token_server):
    client = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"},
                                timeout=httpx2.Timeout(30, read=300))
    with mcp_session(streamable_http_client(token_server, http_client=client)) as s:
        mid = s.ok("memorize", {"content": "the token lets me in"})["id"]
        assert s.ok("recall", {"query": "token"})["results"][0]["id"] == mid


def test_token_from_environment(tmp_path):
    config = write_config(tmp_path)
    with http_server(config, free_port(), env={"AOKUN_SERVER_TOKEN": "env-token"}) as url:
        assert httpx.post(url, json={}).status_code == 401
        ok = httpx.post(url, headers={"Authorization": "Bearer env-token"}, json={})
        assert ok.status_code != 401


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def refusal(url: str, headers: dict) -> str:
    """The one line a 401 says (a JSON-RPC error, as MCP clients show it)."""
    response = httpx.post(url, headers={**JSON_HEADERS, **headers}, json=INITIALIZE, timeout=30)
    assert response.status_code == 401, response.text
    message = response.json()["error"]["message"]
    assert "\n" not in message
    return message


def test_the_bearer_scheme_is_case_insensitive(token_server):
    for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
        response = httpx.post(token_server, json=INITIALIZE, timeout=30,
                              headers={**JSON_HEADERS, "Authorization": f"{scheme} s3cret-token"})
        assert response.status_code == 200, (scheme, response.text)
    assert "Bearer <token>" in refusal(token_server, {"Authorization": "Basic s3cret-token"})


def test_a_refused_token_is_told_why(tmp_path):
    config = write_config(tmp_path, server={"token": "s3cret-token"})
    carol = add_user(config, "carol", "carol")
    revoked = aokun_in_process("users", "revoke", "carol", "--config", config)
    assert revoked.returncode == 0, revoked.stderr
    with http_server(config, free_port()) as url:
        told = refusal(url, {"Authorization": f"Bearer {carol}"})
        assert told == "this token was revoked: ask the admin for a new one (aokun users add)"
        assert "carol" not in told
        assert refusal(url, {"Authorization": "Bearer never-issued"}) == \
            "this token is not valid here: send your token as 'Authorization: Bearer <token>'"
        assert refusal(url, {}) == "send your token as 'Authorization: Bearer <token>'"
        # The official client shows that line, not only the status.
        client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {carol}"},
                                    timeout=httpx2.Timeout(30, read=300))
        with pytest.raises(Exception) as raised:
            with mcp_session(streamable_http_client(url, http_client=client)) as s:
                s.tool_names()
        assert "this token was revoked" in repr(list(leaves(raised.value)))
