"""A config file rewritten in place, hundreds of times, is never applied half-written.

Real processes follow one config file: a front over stdio, a worker and the panel. The test
rewrites the file the way an editor saving in place does (open it, truncate, write it again in
several chunks with a flush after each, a few milliseconds apart), so that most of the time the
file on disk is a part of a version. Every complete version holds three keys in three sections
that move together (memory.recall_top_k = k, forgetting.decay_rate = k/100,
worker.idle_exit_s = 1000 + k), none at its default. Each process logs every change it applies;
replayed from the start, the running values must be a complete version after every line, and
no other key may ever change: a part applied would show a pair out of step, or a key cut back
to its default.
"""

from __future__ import annotations

import random
import re
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from mcp import Client
from mcp.client.stdio import stdio_client

from fake_openai import FakeEmbeddingsServer
from helpers import mcp_session, start_worker, stdio_params, stop, wait_for
from panel_helpers import panel_process

REWRITES = 200
CHECKPOINT_EVERY = 50  # leave a version in place and wait until every process applied it
KS = (2, 3, 4, 6, 7, 8, 9)  # recall_top_k's default (5) left out: a key cut off shows
TRACKED = ("forgetting.decay_rate", "memory.recall_top_k", "worker.idle_exit_s")
APPLY_S = 60.0  # a deadline for a settled version to be applied, not a speed
CHANGE = re.compile(r"^(\S+) (\S+) -> (\S+)$")


def version(k: int, embedding: dict) -> str:
    raw = {"embedding": embedding, "forgetting": {"decay_rate": k / 100, "auto_cleanup_enabled": False},
           "memory": {"recall_top_k": k}, "storage": {"data_dir": "data"},
           "worker": {"autostart": False, "idle_exit_s": 1000.0 + k}}
    return yaml.safe_dump(raw)


def values(k: int) -> dict[str, float]:
    return {"forgetting.decay_rate": k / 100, "memory.recall_top_k": k, "worker.idle_exit_s": 1000.0 + k}


def write_in_place(path: Path, text: str, rng: random.Random) -> None:
    """Truncate the file and write `text` in chunks, flushed one by one a moment apart."""
    with open(path, "r+", encoding="utf-8") as file:
        file.truncate(0)
        file.flush()
        at = 0
        while at < len(text):
            size = rng.randint(16, 96)
            file.write(text[at:at + size])
            file.flush()
            at += size
            time.sleep(rng.uniform(0, 0.003))


def applied_states(log: Path, start: dict[str, float]) -> list[dict[str, float]]:
    """The running values after each change the process logged, replayed from `start`; fails
    at a change to any key but the tracked ones (a restart key included)."""
    state, states = dict(start), []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if "aokun.config" not in line or " changed: " not in line:
            continue
        said = line.split(" changed: ", 1)[1]
        assert "needs a restart" not in said, f"a part of a file reached a process: {line}"
        if not said.startswith("applied "):
            continue
        for change in said.removeprefix("applied ").split(", "):
            key, _, new = CHANGE.match(change).groups()
            assert key in TRACKED, f"a key no complete version changes was applied: {line}"
            state[key] = float(new)
        states.append(dict(state))
    return states


@contextmanager
def running_processes(config: Path):
    """A front over stdio, a worker and a panel, all following `config`; yield their logs."""
    front_log = config.parent / "front.log"
    worker = start_worker(config)
    try:
        with open(front_log, "w") as errlog, \
                mcp_session(Client(stdio_client(stdio_params(config), errlog=errlog))) as session, \
                panel_process(config) as (url, token):
            assert "recall" in session.tool_names()
            with urllib.request.urlopen(f"{url}/?token={token}", timeout=30) as page:
                assert page.status == 200  # the panel's start-up (its watcher) has run
            yield {"front": front_log, "worker": config.parent / "worker-test.log",
                   "panel": config.parent / "panel-test.log"}
    finally:
        assert stop(worker) == 0


@pytest.mark.slow
def test_hundreds_of_in_place_rewrites_apply_only_complete_versions(tmp_path):
    rng = random.Random(29)
    with FakeEmbeddingsServer(dim=16) as api:
        embedding = {"provider": "openai", "base_url": api.base_url, "model": "fake",
                     "dimensions": api.dim, "api_key": "sk-test", "max_retries": 0}
        config = tmp_path / "config.yaml"
        config.write_text(version(KS[0], embedding), encoding="utf-8")
        complete = [values(k) for k in KS]
        with running_processes(config) as logs:

            def all_applied(k: int) -> bool:
                return all((applied_states(log, values(KS[0])) or [values(KS[0])])[-1] == values(k)
                           for log in logs.values())

            # Every process follows the file before the storm: each applies a first change.
            write_in_place(config, version(KS[1], embedding), rng)
            wait_for(lambda: all_applied(KS[1]), APPLY_S, 0.05, "every process applying the first change")
            for i in range(2, REWRITES + 2):
                k = KS[i % len(KS)]
                write_in_place(config, version(k, embedding), rng)
                if i % CHECKPOINT_EVERY == 0 or i == REWRITES + 1:
                    wait_for(lambda k=k: all_applied(k), APPLY_S, 0.05, f"every process applying k={k}")
                else:
                    time.sleep(rng.uniform(0, 0.01))  # the editor's pace between saves
            for kind, log in logs.items():
                states = applied_states(log, values(KS[0]))
                print(f"{kind}: {len(states)} versions applied")
                assert len(states) >= REWRITES // CHECKPOINT_EVERY
                for state in states:
                    assert state in complete, f"{kind} applied a part of a file: {state}"
