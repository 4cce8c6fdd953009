"""`aokun run`: the front over HTTP, a worker and the panel as real child processes of one
supervisor; Ctrl-C and SIGTERM stop all of them gracefully, a child that dies stops the rest."""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from helpers import db_rows, free_port, mcp_session, wait_for, write_config
from run_helpers import PANEL_URL, STARTED, Run, all_gone
from shared.platform import pid_alive

pytestmark = pytest.mark.skipif(os.name != "posix", reason="sends POSIX signals to the supervisor")


@pytest.fixture
def setup(tmp_path):
    port, panel_port = free_port(), free_port()
    return write_config(tmp_path, server={"port": port}), port, panel_port


@pytest.mark.slow
def test_run_serves_all_three_and_ctrl_c_stops_them_gracefully(setup):
    config, port, panel_port = setup
    with Run.aokun_run(config, panel_port) as run:
        url = run.line(PANEL_URL).group(1)
        run.line(re.compile(rf"^front +\| aokun-server: MCP over streamable HTTP at http://127\.0\.0\.1:{port}/mcp$"))
        pids = run.children()
        assert sorted(pids) == ["front", "panel", "worker"]
        header = run.text().split("\nrun ")[0]
        assert f"  MCP endpoint:  http://127.0.0.1:{port}/mcp" in header
        assert f"  stdio command: {Path(sys.executable).parent / 'aokun-server'} --config {config}" in header
        assert "panel  | aokun panel: http://127.0.0.1:" in header and "Stop with Ctrl-C." in header

        with mcp_session(f"http://127.0.0.1:{port}/mcp") as s:
            memory = s.ok("memorize", {"content": "Aokun run keeps the front, the worker and the panel together"})["id"]
            # The supervised worker embeds it: nothing else runs a worker here.
            wait_for(lambda: db_rows(config, "SELECT COUNT(*) FROM vectors WHERE kind = 'document'")[0][0] == 1,
                     what="the supervised worker to embed the memory")
            assert s.ok("recall", {"query": "front worker panel together"})["results"][0]["id"] == memory
        assert httpx.get(url, timeout=30).status_code == 200

        run.proc.send_signal(signal.SIGINT)
        assert run.finish() == 0, run.text()
        assert all_gone(pids.values())
    out = run.text()
    assert "SIGINT received; stopping" in out
    for name in pids:
        assert re.search(rf"^run +\| {name} stopped$", out, re.M), out
    # The worker ran its clean exit: its pid file is removed and it said so.
    assert re.search(r"^worker +\| .* worker \S+ stopped$", out, re.M), out
    assert not list((config.parent / "data").glob("worker-*.pid"))


@pytest.mark.slow
def test_sigterm_stops_all_gracefully(setup):
    config, _, panel_port = setup
    with Run.aokun_run(config, panel_port) as run:
        run.line(PANEL_URL)
        pids = run.children()
        run.line(re.compile(r"^worker +\| .* consuming "))
        run.proc.terminate()
        assert run.finish() == 0, run.text()
        assert all_gone(pids.values())
    assert "SIGTERM received; stopping" in run.text()
    assert re.search(r"^worker +\| .* worker \S+ stopped$", run.text(), re.M)


@pytest.mark.slow
def test_a_child_that_dies_is_reported_and_the_others_are_stopped(setup):
    config, _, panel_port = setup
    with Run.aokun_run(config, panel_port) as run:
        run.line(PANEL_URL)
        pids = run.children()
        os.kill(pids["worker"], signal.SIGKILL)
        assert run.finish() == 128 + signal.SIGKILL, run.text()
        assert all_gone(pids.values())
    out = run.text()
    assert re.search(rf"^run +\| worker exited with status -{int(signal.SIGKILL)}; stopping the others$", out, re.M)
    assert re.search(r"^run +\| front stopped$", out, re.M) and re.search(r"^run +\| panel stopped$", out, re.M)


@pytest.mark.slow
def test_a_busy_front_port_ends_the_run_with_the_fronts_message(setup):
    config, port, panel_port = setup
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen(1)
        with Run.aokun_run(config, panel_port) as run:
            code = run.finish()
            out = run.text()
            assert code == 2, out
            assert re.search(rf"^front +\| aokun-server: port {port} on 127\.0\.0\.1 is in use", out, re.M), out
            assert re.search(r"^run +\| front exited with status 2; stopping the others$", out, re.M), out
            pids = {m.group(1): int(m.group(2)) for m in map(STARTED.match, run.lines) if m}
            assert all_gone(pids.values())


STUBBORN = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ignoring SIGTERM", flush=True)
    time.sleep(120)
""")


def supervise_stubborn(tmp_path, stop_timeout_s: float) -> Run:
    """The supervisor of one child that ignores SIGTERM, once the child says so (a Run to
    enter: it kills both if the test fails)."""
    script = textwrap.dedent(f"""
        import sys
        from aokun_admin.run_all import Supervisor
        child = [sys.executable, "-c", {STUBBORN!r}]
        sys.exit(Supervisor([("stub", child)], sys.stdout, stop_timeout_s={stop_timeout_s}).run())
    """)
    return Run([sys.executable, "-c", script], tmp_path)


def test_a_second_ctrl_c_kills_what_will_not_stop(tmp_path):
    with supervise_stubborn(tmp_path, stop_timeout_s=120) as run:
        run.line(re.compile(r"^stub +\| ignoring SIGTERM$"), timeout=30)
        child = int(run.line(STARTED).group(2))
        run.proc.send_signal(signal.SIGINT)
        run.line(re.compile(r"SIGINT received"))
        time.sleep(0.3)  # the behaviour: a while after asking, the child is still there
        assert pid_alive(child)  # asked once, it ignores SIGTERM, and the supervisor waits
        run.proc.send_signal(signal.SIGINT)
        assert run.finish(timeout=60) == 1  # killed at once, not after stop_timeout_s (120 s)
        assert re.search(r"^run +\| stub killed \(it had not stopped\)$", run.text(), re.M)
        assert not pid_alive(child)


def test_stop_timeout_kills_what_will_not_stop(tmp_path):
    with supervise_stubborn(tmp_path, stop_timeout_s=1) as run:
        run.line(re.compile(r"^stub +\| ignoring SIGTERM$"), timeout=30)
        child = int(run.line(STARTED).group(2))
        started = time.monotonic()
        run.proc.terminate()
        assert run.finish(timeout=60) == 1
        assert time.monotonic() - started >= 1  # it waited its stop_timeout_s before killing
        assert re.search(r"^run +\| stub killed \(it had not stopped\)$", run.text(), re.M)
        assert not pid_alive(child)
