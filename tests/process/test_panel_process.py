"""The panel as a process: loopback only, its URL with a token, a busy port, both commands."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from helpers import BIN, free_port, stop, write_config

URL = re.compile(r"http://127\.0\.0\.1:(\d+)/\?token=([\w-]{20,})")


def listening_addresses(port: int) -> set[str]:
    """Local addresses of the sockets listening on `port`, from Linux's /proc/net tables
    (e.g. {'127.0.0.1'}; '0.0.0.0' or '::' would mean every interface)."""
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(address)
                # The kernel prints each 32-bit word in host (little-endian) order.
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.add(socket.inet_ntop(family, raw))
    return found


def start(command: list[str], config: Path, port: int) -> tuple[subprocess.Popen, str]:
    """Start the panel; return the process and the first line it printed (its URL)."""
    proc = subprocess.Popen([str(BIN / command[0]), *command[1:], "--config", str(config),
                             "--port", str(port), "--no-browser"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, proc.stderr.readline()


@pytest.mark.slow
@pytest.mark.parametrize("command", [["aokun", "panel"], ["aokun-panel"]])
def test_the_panel_listens_on_loopback_only_and_prints_its_url_with_a_token(tmp_path, command):
    if not Path("/proc/net/tcp").exists():
        pytest.skip("needs Linux's /proc/net/tcp to see the listening socket")
    config = write_config(tmp_path)
    port = free_port()
    proc, line = start(command, config, port)
    try:
        found = URL.search(line)
        assert found, line
        assert int(found.group(1)) == port
        assert listening_addresses(port) == {"127.0.0.1"}
        token = found.group(2)
        deadline = time.monotonic() + 30
        while True:  # the socket listens before the app has started; requests wait for it
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/?token={token}", timeout=30)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert page.status_code == 200 and "Aokun Memory" in page.text
        assert httpx.get(f"http://127.0.0.1:{port}/").status_code == 401
    finally:
        # uvicorn shuts down gracefully on SIGTERM, then re-raises it: -SIGTERM is a clean stop.
        assert stop(proc) in (0, -signal.SIGTERM)


def test_a_busy_port_is_one_line_and_exit_2(tmp_path):
    config = write_config(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([str(BIN / "aokun"), "panel", "--config", str(config), "--port", str(port),
                                 "--no-browser"], capture_output=True, text=True, timeout=60,
                                stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("aokun panel: ") and f"port {port}" in lines[0] and "in use" in lines[0]
    assert "token" not in result.stderr


def test_a_token_in_the_url_wins_over_an_old_cookie(tmp_path):
    """After a restart the browser still holds the previous start's cookie: the printed URL
    (?token=NEW) opens the panel and replaces the cookie; a wrong ?token= is refused even beside
    a valid cookie."""
    from panel_helpers import panel_process

    config = write_config(tmp_path)
    with panel_process(config) as (url, old_token):
        pass
    with panel_process(config) as (url, token):
        assert token != old_token
        with httpx.Client(base_url=url, timeout=30) as client:
            client.cookies.set("aokun_panel", old_token, domain="127.0.0.1")
            deadline = time.monotonic() + 30
            while True:
                try:
                    assert client.get("/").status_code == 401  # the stale cookie alone
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            page = client.get(f"/?token={token}")
            assert page.status_code == 200 and "Aokun Memory" in page.text
            assert f"aokun_panel={token}" in page.headers.get("set-cookie", "")
            client.cookies.clear()
            client.cookies.set("aokun_panel", token, domain="127.0.0.1")
            assert client.get("/").status_code == 200  # the new cookie carries it from now on
            assert client.get(f"/?token={old_token}").status_code == 401
            assert client.get("/?token=wrong").status_code == 401
