"""`aokun mcp-config` run as the admin CLI parses it, in the test process, for the tests of
what it prints (tests/test_mcp_config.py) and of the servers its entries start or reach
(tests/process/test_mcp_config_entries.py)."""

from __future__ import annotations

import argparse
import json
import shlex

from aokun_admin.commands import Admin, _with_config
from aokun_admin.mcp_config import add_parser, cmd_mcp_config
from shared.config import load_config


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
    """The `claude mcp add` line printed on stderr, split as a shell splits it."""
    [line] = [line.strip() for line in err.splitlines() if line.strip().startswith("claude mcp add")]
    return shlex.split(line)
