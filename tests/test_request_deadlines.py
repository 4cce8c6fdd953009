"""Whole-request deadlines for outbound calls: the deadline belongs to one request, reaches a
proxy's transport too, and cuts a trickling answer at the client's timeout
(tests/process/test_trickling_endpoints.py: the summarizer's and the embedder's calls cut so,
in a child process against a trickling server)."""

from __future__ import annotations

import pytest

from fake_chat import FakeChatServer, TrickleServer, memory_reply
from shared import http_retry


def test_the_deadline_belongs_to_the_request_and_is_cleared_after_it():
    """A prompt answer goes through the deadline client untouched, and no deadline outlives the
    call that set it (the context variable is reset on every path)."""
    with FakeChatServer(memory_reply({"summary": "ok"})) as api:
        with http_retry.client(api.base_url + "/", {}, 2) as client:
            response = http_retry.post_with_retry(client, "chat/completions", {"messages": []},
                                                  what="chat endpoint", error=RuntimeError, max_retries=0)
    assert response.status_code == 200
    assert http_retry._DEADLINE.get() is None
    with TrickleServer("body") as api, http_retry.client(api.base_url + "/", {}, 1) as client:
        with pytest.raises(RuntimeError, match="timed out after 1 s"):
            http_retry.post_with_retry(client, "chat/completions", {}, what="chat endpoint",
                                       error=RuntimeError, max_retries=0)
    assert http_retry._DEADLINE.get() is None


def test_a_proxy_transport_from_the_environment_gets_the_deadline_too(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    with http_retry.client("https://api.example.invalid/", {}, 2) as client:
        pools = [transport._pool for transport in [client._transport, *client._mounts.values()]
                 if transport is not None]
    assert len(pools) >= 2
    assert all(isinstance(pool._network_backend, http_retry._DeadlineBackend) for pool in pools)
