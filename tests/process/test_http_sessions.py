"""MCP sessions over HTTP are bounded (aokun_server/sessions.py): a token holds at most
server.max_sessions_per_token open sessions, one more is refused in one line; a session left
without a DELETE is closed after server.session_idle_timeout_s and frees its place.

Real fronts over HTTP; sessions opened with raw `initialize` requests, as a client that never
says goodbye would, and with the official client.
"""

from __future__ import annotations

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from helpers import free_port, http_server, leaves, mcp_session, wait_for, write_config
from users_helpers import add_user

pytestmark = pytest.mark.slow

ADMIN_TOKEN = "sessions-admin-token"
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "leaky", "version": "1"}}}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


def headers(token: str, session: str | None = None) -> dict:
    found = {**JSON_HEADERS, "Authorization": f"Bearer {token}"}
    if session:
        found["Mcp-Session-Id"] = session
    return found


def initialize(url: str, token: str) -> httpx.Response:
    return httpx.post(url, headers=headers(token), json=INITIALIZE, timeout=30)


def open_session(url: str, token: str) -> str:
    opened = initialize(url, token)
    assert opened.status_code == 200, opened.text
    return opened.headers["mcp-session-id"]


def ping(url: str, token: str, session: str) -> httpx.Response:
    return httpx.post(url, headers=headers(token, session), json=PING, timeout=30)


def assert_refused_at_the_cap(refused: httpx.Response, held: int) -> None:
    assert refused.status_code == 429, refused.text
    assert "mcp-session-id" not in refused.headers
    message = refused.json()["error"]["message"]
    assert "\n" not in message
    assert f"already holds {held} open MCP sessions (server.max_sessions_per_token)" in message
    assert "server.session_idle_timeout_s" in message


def test_a_token_holds_at_most_its_cap_of_sessions(tmp_path):
    config = write_config(tmp_path, server={"token": ADMIN_TOKEN, "max_sessions_per_token": 3})
    alice = add_user(config, "alice", "alice")
    with http_server(config, free_port()) as url:
        sessions = [open_session(url, alice) for _ in range(3)]
        assert_refused_at_the_cap(initialize(url, alice), 3)
        # The refused request opened nothing; the open ones all still serve.
        assert all(ping(url, alice, s).status_code == 200 for s in sessions)
        # Another token has a cap of its own.
        admins = open_session(url, ADMIN_TOKEN)
        # The official client, in the handshake era (sessions are that era's), shows the
        # refusal's line.
        client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {alice}"},
                                    timeout=httpx2.Timeout(30, read=300))
        with pytest.raises(Exception) as raised:
            with mcp_session(Client(streamable_http_client(url, http_client=client), mode="legacy")) as s:
                s.tool_names()
        assert any("server.max_sessions_per_token" in str(error) for error in leaves(raised.value)
                   if isinstance(error, MCPError)), raised.value
        # A session ended by its client frees its place at once.
        ended = httpx.delete(url, headers=headers(alice, sessions[0]), timeout=30)
        assert ended.status_code == 200, ended.text
        assert ping(url, alice, sessions[0]).status_code == 404
        sessions[0] = open_session(url, alice)
        assert_refused_at_the_cap(initialize(url, alice), 3)
        assert ping(url, ADMIN_TOKEN, admins).status_code == 200


def test_a_session_left_open_expires_and_frees_its_place(tmp_path):
    config = write_config(tmp_path, server={"token": ADMIN_TOKEN, "max_sessions_per_token": 2,
                                            "session_idle_timeout_s": 1.0})
    with http_server(config, free_port()) as url:
        left = [open_session(url, ADMIN_TOKEN) for _ in range(2)]
        # Never touched again (a request would keep a session alive): once both have been
        # idle for a second the SDK closes them, and two new ones fit under the cap.
        fresh: list[str] = []

        def opened_another() -> bool:
            attempt = initialize(url, ADMIN_TOKEN)
            if attempt.status_code == 429:
                return False
            assert attempt.status_code == 200, attempt.text
            fresh.append(attempt.headers["mcp-session-id"])
            return len(fresh) == 2

        wait_for(opened_another, 60, what="room for new sessions once the old ones expired")
        # The cap counted only live sessions, so both left open had been closed: the oldest
        # expire first.
        for session in left:
            gone = ping(url, ADMIN_TOKEN, session)
            assert gone.status_code == 404, gone.text
