"""One log format for every process, and no library noise at the default levels: a real
front (HTTP), worker and panel write their stderr to files while memories go through the
pipeline and the config file changes; every line they log has the same shape, a config reload
reads the same in each, and neither faiss's loader probes nor Huey's per-task lines appear."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers import BIN, all_processed, free_port, mcp_session, stop, wait_for, write_config

# <date> <time>,<ms> <logger> <LEVEL> <message>: shared/logs.py's FORMAT.
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [\w.]+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S")
# What a process prints (not logs) on purpose: where it listens.
PRINTED = re.compile(r"^aokun-server: MCP over streamable HTTP at |^aokun panel: http://127\.0\.0\.1:")
# faiss's loader probing for builds; Huey's per-task lines (logger "huey"), its list of tasks and
# "Periodic tasks are disabled." (its consumer's start and stop lines are kept).
NOISE = ("ModuleNotFoundError", "faiss.loader", " huey INFO ", "Executing shared.tasks", "executed in",
         "Periodic tasks", "The following commands are available", "Scheduler runs every")


def start(name: str, args: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([str(BIN / name), *args], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)


def lines_of(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8", errors="replace").splitlines()


def reload_line(log: Path) -> str | None:
    found = [line for line in lines_of(log) if "applied memory.recall_top_k" in line]
    return found[-1] if found else None


@pytest.mark.slow
@pytest.mark.parametrize("level", ["WARNING", "INFO"])  # the default, and a user who asks for more
def test_front_worker_and_panel_log_alike_and_quietly(tmp_path, level):
    port = free_port()
    config = write_config(tmp_path, server={"port": port, "log_level": level})
    logs = {name: tmp_path / f"{name}.log" for name in ("front", "worker", "panel")}
    procs = {
        "front": start("aokun-server", ["--config", str(config), "--transport", "http"], logs["front"]),
        "worker": start("aokun-worker", ["--config", str(config)], logs["worker"]),
        "panel": start("aokun-panel", ["--config", str(config), "--port", str(free_port()),
                                       "--no-browser"], logs["panel"]),
    }
    try:
        wait_for(lambda: any(PRINTED.match(line) for line in lines_of(logs["front"])),
                 what="the front to listen")
        with mcp_session(f"http://127.0.0.1:{port}/mcp") as s:
            for i in range(6):
                s.ok("memorize", {"content": f"Note {i}: the lighthouse keeper logs the tide at dawn"})
        wait_for(lambda: all_processed(config, 6), 120, what="the worker to process 6 memories")
        wait_for(lambda: any(PRINTED.match(line) for line in lines_of(logs["panel"])),
                 what="the panel to listen")

        raw = yaml.safe_load(config.read_text(encoding="utf-8"))
        raw["memory"] = {"recall_top_k": 3}
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")
        for name, log in logs.items():
            wait_for(lambda log=log: reload_line(log), 30, what=f"the {name}'s reload line")
    finally:
        codes = {name: stop(proc) for name, proc in procs.items()}

    reloads = {name: reload_line(log) for name, log in logs.items()}
    for name, log in logs.items():
        text = log.read_text(encoding="utf-8", errors="replace")
        for noise in NOISE:
            assert noise not in text, f"{name} log has {noise!r}:\n{text}"
        odd = [line for line in lines_of(log) if not LOG_LINE.match(line) and not PRINTED.match(line)]
        assert odd == [], f"{name} log has lines in another format:\n{text}"
        # The same reload line, level and logger in every process (only the time differs).
        assert reloads[name].split(" ", 2)[2] == reloads["front"].split(" ", 2)[2], reloads
    assert " aokun.config INFO config " in reloads["front"]
    assert "applied memory.recall_top_k 5 -> 3" in reloads["front"], reloads["front"]
    if level == "INFO":  # uvicorn's lines too, in the same format
        assert any(" uvicorn.error INFO " in line for line in lines_of(logs["front"])), lines_of(logs["front"])
    # The worker said what it did at INFO, in the same format.
    assert any(" aokun.worker INFO " in line and "consuming" in line for line in lines_of(logs["worker"]))
    assert codes["worker"] == 0, logs["worker"].read_text(encoding="utf-8")
