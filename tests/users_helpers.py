"""Users of a front under test: a user made with the real `aokun users add`, an MCP session
over HTTP with a user's token (the official client), and a panel request with one."""

from __future__ import annotations

from pathlib import Path

import httpx
import httpx2
from mcp.client.streamable_http import streamable_http_client

from aokun_panel.security import csrf_token
from helpers import aokun_in_process, mcp_session


def add_user(config: Path, name: str, personas: str) -> str:
    """`aokun users add NAME --personas PERSONAS`; the token it shows."""
    done = aokun_in_process("users", "add", name, "--personas", personas, "--config", config)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def session(url: str, token: str):
    """The official client on the HTTP front at `url`, sending `token` as its bearer."""
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                timeout=httpx2.Timeout(30, read=300))
    return mcp_session(streamable_http_client(url, http_client=client))


def as_user(site, token: str, method: str, path: str, **kwargs) -> httpx.Response:
    """A request to the panel at `site.url` with `token`, as the panel's pages send one
    (token header, same origin, CSRF token); redirects are not followed."""
    headers = {"X-Aokun-Token": token, "Origin": site.url, "X-CSRF-Token": csrf_token(token),
               **kwargs.pop("headers", {})}
    return httpx.request(method, f"{site.url}{path}", headers=headers, timeout=60,
                         follow_redirects=False, **kwargs)
