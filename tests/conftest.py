"""Fixtures: a fresh config per test and the real front, built in this process."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import front_in_process, write_config
from shared.config import ALL_TOOLS


@pytest.fixture
def config_path(tmp_path) -> Path:
    """Every tool listed, so every tool is callable (a server calls only the tools it lists);
    tests of the default list write their own config."""
    return write_config(tmp_path, server={"exposed_tools": list(ALL_TOOLS)})


@pytest.fixture
def session(config_path):
    """The real front on config_path, built in this process and spoken to by the official
    client (tests/process/test_tools_stdio.py speaks to it over stdio)."""
    with front_in_process(config_path) as connected:
        yield connected
