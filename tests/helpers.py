"""Test helpers: real config files, real servers in subprocesses, the official MCP client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import yaml
from anyio.from_thread import start_blocking_portal
from mcp import Client
from mcp.client.stdio import StdioServerParameters

BIN = Path(sys.executable).parent


def write_config(folder: Path, **sections) -> Path:
    """Write a config.yaml in folder with data_dir 'data' plus the given sections."""
    # No autostarted worker unless a test asks for one: most tests need none, and a detached
    # worker would outlive the test.
    raw = {"storage": {"data_dir": "data"}, "worker": {"autostart": False}}
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


class McpSession:
    """A synchronous face on the official async MCP client, for plain pytest tests."""

    def __init__(self, portal, client: Client):
        self._portal = portal
        self.client = client

    def call(self, name: str, arguments: dict | None = None):
        return self._portal.call(lambda: self.client.call_tool(name, arguments or {}))

    def ok(self, name: str, arguments: dict | None = None) -> dict:
        """Call a tool that must succeed; return its structured content."""
        result = self.call(name, arguments)
        assert not result.is_error, f"{name} failed: {result.content[0].text}"
        assert result.structured_content is not None, f"{name} sent no structured content"
        return result.structured_content

    def error(self, name: str, arguments: dict | None = None) -> str:
        """Call a tool that must fail with a tool error; return the message."""
        result = self.call(name, arguments)
        assert result.is_error, f"{name} unexpectedly succeeded: {result.structured_content}"
        return result.content[0].text

    def tool_names(self) -> list[str]:
        return [t.name for t in self._portal.call(self.client.list_tools).tools]


@contextmanager
def mcp_session(server):
    """Open the official client against `server` (stdio params, URL, transport or MCPServer)."""
    with start_blocking_portal() as portal:
        client = Client(server) if not isinstance(server, Client) else server
        cm = portal.wrap_async_context_manager(client)
        with cm as entered:
            yield McpSession(portal, entered)


def stdio_params(config: Path, env: dict | None = None) -> StdioServerParameters:
    return StdioServerParameters(command=str(BIN / "aokun-server"),
                                 args=["--config", str(config)], env=env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_server(config: Path, port: int, env: dict | None = None):
    """Run `aokun-server --transport http` until the block ends; yield its /mcp URL."""
    proc = subprocess.Popen(
        [str(BIN / "aokun-server"), "--config", str(config), "--transport", "http",
         "--port", str(port)],
        env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: {proc.stderr.read().decode()}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def db_rows(config: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Read the main database directly, as an independent check on what tools report."""
    import sqlite3

    data_dir = Path(yaml.safe_load(config.read_text())["storage"]["data_dir"])
    if not data_dir.is_absolute():
        data_dir = config.parent / data_dir
    conn = sqlite3.connect(data_dir / "aokun.db")
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def as_json(result) -> str:
    return json.dumps(result, ensure_ascii=False)

