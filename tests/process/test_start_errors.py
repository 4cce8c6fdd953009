"""Start-up failures a new user meets are one line and exit status 2, never a traceback."""

from __future__ import annotations

import socket
import subprocess

import pytest

from helpers import BIN, free_port, write_config


def run(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def one_line(run: subprocess.CompletedProcess) -> str:
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


@pytest.fixture
def data_dir_under_a_file(tmp_path):
    """data_dir = <tmp>/afile/data: cannot be created, whoever runs the test (root included)."""
    (tmp_path / "afile").write_text("a regular file")
    return write_config(tmp_path, storage={"data_dir": "afile/data"})


@pytest.mark.parametrize("command", [
    ["aokun-server"], ["aokun-server", "--transport", "http", "--port", "0"], ["aokun-worker"]])
def test_an_unwritable_data_dir_is_one_line(data_dir_under_a_file, tmp_path, command):
    result = run(BIN / command[0], *command[1:], "--config", data_dir_under_a_file)
    assert result.returncode == 2
    assert one_line(result).startswith(f"{command[0]}: cannot create data_dir {tmp_path / 'afile' / 'data'}: ")


def test_a_busy_port_is_one_line_and_nothing_claims_to_serve(tmp_path):
    config = write_config(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(BIN / "aokun-server", "--config", config, "--transport", "http", "--port", port)
    assert result.returncode == 2
    assert one_line(result) == (f"aokun-server: port {port} on 127.0.0.1 is in use (another "
                                "aokun-server?); choose another with --port or server.port")
    assert not (tmp_path / "data").exists()  # refused before opening anything


def test_the_serving_line_comes_once_the_port_accepts_connections(tmp_path):
    config = write_config(tmp_path)
    port = free_port()
    proc = subprocess.Popen([BIN / "aokun-server", "--config", config, "--transport", "http",
                             "--port", str(port)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert line.strip() == f"aokun-server: MCP over streamable HTTP at http://127.0.0.1:{port}/mcp"
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # not refused
    finally:
        proc.terminate()
        proc.wait(timeout=30)
