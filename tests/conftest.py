"""Fixtures: a fresh config per test and a real aokun-server over stdio."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import mcp_session, stdio_params, write_config
from shared.config import ALL_TOOLS


@pytest.fixture
def config_path(tmp_path) -> Path:
    """Every tool listed, so every tool is callable (a server calls only the tools it lists);
    tests of the default list write their own config."""
    return write_config(tmp_path, server={"exposed_tools": list(ALL_TOOLS)})


@pytest.fixture
def stdio(config_path):
    """A real aokun-server subprocess over stdio, spoken to by the official client."""
    with mcp_session(stdio_params(config_path)) as session:
        yield session
