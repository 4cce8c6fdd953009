"""The command lines explain themselves: --version on every command, a description on every
help page, a one-line refusal (exit 2, nothing created) for store commands without a config
file, one `aokun run` per data_dir, and aokun-server on a terminal. The console scripts,
the terminal and `aokun run` through real processes; what `aokun` says (help pages,
refusals, status) by its main() in this process."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from aokun_admin.commands import build_parser
from helpers import BIN, aokun_in_process, free_port, mcp_session, stdio_params, write_config
from run_helpers import PANEL_URL, Run, all_gone
from shared import __version__
from shared.platform import pid_alive

COMMANDS = ("aokun", "aokun-server", "aokun-worker", "aokun-panel")


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("AOKUN_CONFIG", "AOKUN_SERVER_TOKEN")}
    return {**env, **extra}


def run(*args, cwd: Path | None = None, env: dict | None = None, timeout: float = 120,
        **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / args[0]), *map(str, args[1:])], cwd=cwd, env=env or clean_env(),
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def aokun(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The `aokun` command in this process, in folder `cwd`, without AOKUN_CONFIG unless given."""
    return aokun_in_process(*args, cwd=cwd, env=env or clean_env())


@pytest.mark.parametrize("command", COMMANDS)
def test_version_on_every_command(command, tmp_path):
    result = run(command, "--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"aokun {__version__}\n"
    assert not (tmp_path / "data").exists()


def subcommands() -> list[str]:
    parser = build_parser()
    [commands] = [a for a in parser._actions if a.dest == "command"]
    return sorted(commands.choices)


def description_of(help_page: str) -> str:
    """The paragraph after the usage lines: empty when the page opens on the arguments."""
    paragraphs = help_page.strip().split("\n\n")
    following = paragraphs[1] if len(paragraphs) > 1 else ""
    return "" if following.startswith(("positional arguments:", "options:")) else following


@pytest.mark.parametrize("command", [None, *subcommands()])
def test_every_help_page_opens_with_a_description(command, tmp_path):
    result = aokun(*([command] if command else []), "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    description = description_of(result.stdout)
    assert len(description.split()) >= 3, result.stdout


def test_the_maintenance_help_says_what_each_action_does(tmp_path):
    page = aokun("maintenance", "--help", cwd=tmp_path).stdout
    for action in ("decay", "archive", "atoms", "backup", "reconcile", "all"):
        assert re.search(rf"^  {action} +\w+ \w+", page, re.M), page


@pytest.mark.parametrize("command", [["aokun", "--version"], ["aokun-server", "--help"],
                                     ["aokun-worker", "--help"], ["aokun-panel", "--help"]])
def test_the_process_commands_describe_themselves(command, tmp_path):
    result = run(*command, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip(), result.stderr
    if command[1] == "--help":
        assert len(description_of(result.stdout).split()) >= 5, result.stdout


@pytest.mark.parametrize("args", [["status"], ["stats"], ["doctor"], ["repair"], ["backup"],
                                  ["maintenance", "decay"], ["export", "out.jsonl"],
                                  ["panel", "--no-browser"], ["run"], ["mcp-config"]])
def test_store_commands_refuse_to_run_on_defaults(args, tmp_path):
    result = aokun(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"aokun {args[0]}: no config file found: pass --config FILE, "
                           "set AOKUN_CONFIG=FILE, or run it in the folder holding config.yaml"), line
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no ./data, no export


def test_aokun_panel_on_its_own_refuses_defaults_too(tmp_path):
    result = run("aokun-panel", "--no-browser", "--port", "0", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines()[-1].startswith("aokun panel: no config file found: pass --config FILE")
    assert list(tmp_path.iterdir()) == []


def test_a_config_file_found_any_way_lets_them_run(tmp_path):
    config = write_config(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert aokun("status", cwd=tmp_path).returncode == 0  # ./config.yaml
    result = aokun("status", cwd=elsewhere, env=clean_env(AOKUN_CONFIG=str(config)))
    assert result.returncode == 0, result.stderr
    assert f"data_dir: {tmp_path / 'data'}" in result.stdout
    assert aokun("config", cwd=elsewhere).returncode == 0  # prints the defaults
    assert not (elsewhere / "data").exists()


@pytest.mark.skipif(os.name != "posix", reason="a pseudo-terminal needs POSIX")
def test_aokun_server_on_a_terminal_explains_itself_and_starts_nothing(tmp_path):
    config = write_config(tmp_path, worker={"autostart": True})
    main, terminal = pty.openpty()
    try:
        result = run("aokun-server", "--config", config, cwd=tmp_path, stdin=terminal)
    finally:
        os.close(terminal)
        os.close(main)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    err = result.stderr
    assert "MCP server" in err and "MCP host" in err
    assert "aokun run" in err and "aokun mcp-config" in err
    assert (f"npx @modelcontextprotocol/inspector --cli -e AOKUN_CONFIG={config} "
            f"{BIN / 'aokun-server'} --method tools/list") in err
    assert not (tmp_path / "data").exists()  # no store opened, so no worker autostarted


def test_aokun_server_without_a_terminal_still_serves_stdio(tmp_path):
    config = write_config(tmp_path)
    with mcp_session(stdio_params(config)) as s:
        assert "memorize" in s.tool_names()


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="sends POSIX signals to the supervisor")
def test_a_second_aokun_run_names_the_first_and_starts_nothing(tmp_path):
    port, panel_port = free_port(), free_port()
    config = write_config(tmp_path, server={"port": port})
    first = Run.aokun_run(config, panel_port)
    try:
        first.line(PANEL_URL)
        first.line(re.compile(rf"^front +\| aokun-server: MCP over streamable HTTP at .*:{port}/mcp$"))
        pids = first.children()
        second = subprocess.run([sys.executable, "-m", "aokun_admin.main", "run", "--config", str(config),
                                 "--panel-port", str(free_port())], cwd=tmp_path, capture_output=True,
                                text=True, timeout=120, env=clean_env())
        assert second.returncode == 1, second.stdout + second.stderr
        assert second.stdout == ""  # no banner, no child started
        err = second.stderr
        assert "already running" in err and f"pid {first.proc.pid}" in err
        assert f"http://127.0.0.1:{port}/mcp" in err and f"http://127.0.0.1:{panel_port}/" in err
        # The first one is untouched: its children live and its front answers.
        assert all(pid_alive(pid) for pid in pids.values())
        with mcp_session(f"http://127.0.0.1:{port}/mcp") as s:
            assert "recall" in s.tool_names()
        first.proc.send_signal(signal.SIGINT)
        assert first.finish() == 0, first.text()
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
    assert all_gone(pids.values())
    # Once the first has stopped, a run may start again: nothing of it is left to refuse on.
    assert not (tmp_path / "data" / "run.json").exists()


@pytest.mark.slow
def test_a_run_killed_without_cleaning_up_does_not_block_the_next(tmp_path):
    port = free_port()
    config = write_config(tmp_path, server={"port": port})
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that is no longer running, as a kill -9'd `aokun run` leaves
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "run.json").write_text(json.dumps(
        {"pid": gone.pid, "started": 0, "front": "http://127.0.0.1:1/mcp", "panel": "x"}))
    with socket.socket() as taken:  # the front stops at once: only getting past the check matters
        taken.bind(("127.0.0.1", port))
        taken.listen(1)
        result = subprocess.run([sys.executable, "-m", "aokun_admin.main", "run", "--config", str(config),
                                 "--panel-port", str(free_port())], cwd=tmp_path, capture_output=True,
                                text=True, timeout=120, env=clean_env())
    assert "already running" not in result.stderr
    assert re.search(r"^run +\| front started", result.stdout, re.M), result.stdout + result.stderr
    assert result.returncode == 2, result.stdout
    assert not (tmp_path / "data" / "run.json").exists()


def closed_pipe(*args: str, env: dict | None = None) -> tuple[int, str]:
    """Run `aokun ARGS` with its stdout a real pipe whose reader is gone before the command
    writes a byte (`aokun stats | head`, head long done); return (exit code, stderr)."""
    proc = subprocess.Popen([str(BIN / "aokun"), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env or clean_env())
    proc.stdout.close()
    try:
        err = proc.stderr.read().decode(errors="replace")
        return proc.wait(timeout=120), err
    finally:
        proc.kill()
        proc.stderr.close()


@pytest.mark.parametrize("args", [["stats"], ["config"], ["doctor"], ["status"], ["users", "list"],
                                  ["mcp-config"], ["hook", "prompt", "lighthouse", "--no-front"]])
def test_output_to_a_closed_pipe_ends_quietly(args, tmp_path):
    from helpers import memory_service
    from shared.config import load_config
    from shared.store import open_store
    from shared.store.model.documents import MemoryFields

    config = write_config(tmp_path)
    store = open_store(load_config(config).storage)
    try:
        memory_service(store).memorize("the lighthouse keeper retired in May", MemoryFields())
    finally:
        store.close()
    code, err = closed_pipe("--config", str(config), *args)
    assert err == ""  # no BrokenPipeError traceback, no "Exception ignored" line
    # As a program killed by SIGPIPE; the hook never fails its host, whatever happens.
    assert code == (0 if args[0] == "hook" else 141)
    # The same command with a reader prints what it prints (doctor exits 1: no worker ran).
    done = run("aokun", "--config", config, *args)
    assert done.returncode in (0, 1) and done.stdout and "Traceback" not in done.stderr, done.stderr
