"""The front over streamable HTTP, with and without a bearer token."""

from __future__ import annotations

import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from helpers import free_port, http_server, mcp_session, write_config


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
    with pytest.raises(Exception):
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
