"""Live reload: fronts, workers and the config itself follow a saved config file.

Real processes (a front over stdio and over streamable HTTP, an autostarted worker) and the
official MCP client, or a worker built in this process where its stages are what follows the
file; the file is rewritten the way an editor (in place) or the panel (temp file + rename)
saves it, and nothing is restarted.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import mcp_types
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import stdio_client

from aokun_server.app import build_front
from fake_openai import FakeEmbeddingsServer
from helpers import (
    db_rows,
    free_port,
    http_server,
    mcp_session,
    stdio_params,
    wait_for,
    write_config,
)
from shared import platform
from shared.assembly import Services
from shared.config import load_config
from shared.live_config import LiveConfig
from shared.store import open_store
from shared.store.model.documents import MemoryFields
from shared.worker_pid_files import read_pid_files

# How long to wait for a saved change before failing: a deadline, not the speed (the 2 s the
# README promises comes from live_config's debounce, 0.5 s, not from the machine the tests run on).
RELOAD_S = 60.0


@pytest.fixture
def api():
    with FakeEmbeddingsServer(dim=16) as server:
        yield server


def fake_config(tmp_path: Path, api: FakeEmbeddingsServer, **sections) -> Path:
    embedding = {"provider": "openai", "base_url": api.base_url, "model": "fake",
                 "dimensions": api.dim, "api_key": "sk-test", "max_retries": 0}
    return write_config(tmp_path, embedding=embedding, **sections)


def rewrite(config: Path, atomic: bool = False, **sections) -> None:
    """Change some keys of config.yaml, keeping the others: in place, or as the panel saves
    (a temporary file renamed over it)."""
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    text = yaml.safe_dump(raw, allow_unicode=True)
    if atomic:
        temp = config.with_name(".config.yaml.saving")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, config)
    else:
        config.write_text(text, encoding="utf-8")


def lines_with(log: Path, text: str) -> list[str]:
    return [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if text in line]


@contextmanager
def stdio_front(config: Path, **client_options):
    """A real aokun-server over stdio whose stderr (its log) goes to front.log."""
    log = config.parent / "front.log"
    with open(log, "w") as errlog:
        client = Client(stdio_client(stdio_params(config), errlog=errlog), **client_options)
        with mcp_session(client) as session:
            yield session, log


def recall_count(session, query: str) -> int:
    return len(session.ok("recall", {"query": query})["results"])


# -- the front -------------------------------------------------------------------------------

@pytest.mark.slow
def test_front_applies_a_saved_recall_top_k_ignores_an_invalid_file_and_reports_restart_keys(tmp_path, api):
    config = fake_config(tmp_path, api, memory={"recall_top_k": 5})
    with stdio_front(config) as (s, log):
        for i in range(8):
            s.ok("memorize", {"content": f"note {i} about the harbour lighthouse"})
        assert recall_count(s, "lighthouse") == 5

        saved = time.monotonic()
        rewrite(config, memory={"recall_top_k": 3})
        wait_for(lambda: recall_count(s, "lighthouse") == 3, RELOAD_S, 0.05, "recall_top_k 3 applied")
        print(f"recall_top_k applied {time.monotonic() - saved:.2f} s after the save")
        assert len(lines_with(log, "applied memory.recall_top_k 5 -> 3")) == 1

        rewrite(config, memory={"recall_top_k": 0})
        wait_for(lambda: lines_with(log, "not applied"), 10, what="the invalid file logged")
        [line] = lines_with(log, "not applied")
        assert "memory.recall_top_k must be >= 1, got 0" in line and "running config stays" in line
        assert recall_count(s, "lighthouse") == 3

        # Restart-only keys are reported and left alone; a live key saved with them applies.
        rewrite(config, memory={"recall_top_k": 3}, server={"port": 8001, "max_content_chars": 50},
                storage={"busy_timeout_ms": 20000})
        wait_for(lambda: lines_with(log, "needs a restart"), 10, what="restart keys reported")
        [line] = lines_with(log, "needs a restart")
        assert "applied server.max_content_chars 20000 -> 50" in line
        assert "server.port 8000 -> 8001" in line and "storage.busy_timeout_ms 10000 -> 20000" in line
        assert "limit is 50" in s.error("memorize", {"content": "x" * 51})
        assert recall_count(s, "lighthouse") == 3


def test_restart_keys_keep_their_running_values(tmp_path, caplog, monkeypatch):
    monkeypatch.delenv("AOKUN_SERVER_TOKEN", raising=False)  # it would override the file's token
    config = write_config(tmp_path, storage={"busy_timeout_ms": 10000})
    live = LiveConfig(load_config(config))
    services = Services(live, open_store(live.now.storage), queued=False)
    lifecycle = services.lifecycle
    watcher = live.watch()
    caplog.set_level(logging.INFO, logger="aokun.config")
    try:
        rewrite(config, storage={"busy_timeout_ms": 20000}, forgetting={"decay_rate": 0.2},
                graph={"max_topics": 7}, server={"token": "s3cret-token"})
        wait_for(lambda: live.now.forgetting.decay_rate == 0.2, RELOAD_S, 0.05, "decay_rate applied")
        assert lifecycle.live.now.forgetting.decay_rate == 0.2  # upkeep jobs read it at their next run
        assert live.now.storage.busy_timeout_ms == 10000
        assert live.now.graph.max_topics == 3 and live.now.server.token == ""
        # The start config stays what the process started with, live keys included.
        assert live.at_start.storage.busy_timeout_ms == 10000 and live.at_start.forgetting.decay_rate == 0.01
        assert set(live.pending_restart) == {"storage.busy_timeout_ms", "graph.max_topics", "server.token"}
        [line] = [r.getMessage() for r in caplog.records if "changed" in r.getMessage()]
        assert "applied forgetting.decay_rate 0.01 -> 0.2" in line and "graph.max_topics 3 -> 7" in line
        assert "server.token (hidden) changed" in line and "s3cret" not in line
    finally:
        watcher.stop()
        services.close()


def test_a_broken_file_is_one_log_line_and_a_fixed_one_applies(tmp_path, caplog):
    config = write_config(tmp_path, memory={"recall_top_k": 5})
    live = LiveConfig(load_config(config))
    watcher = live.watch()
    caplog.set_level(logging.INFO, logger="aokun.config")
    try:
        config.write_text("memory:\n  recall_top_k: [5\n", encoding="utf-8")
        wait_for(lambda: [r for r in caplog.records if "not applied" in r.getMessage()], 5,
                 what="the broken file logged")
        [record] = [r for r in caplog.records if "not applied" in r.getMessage()]
        assert "cannot read config file" in record.getMessage() and "\n" not in record.getMessage()
        assert live.now.memory.recall_top_k == 5
        rewrite_text = yaml.safe_dump({"storage": {"data_dir": "data"}, "worker": {"autostart": False},
                                       "memory": {"recall_top_k": 4}})
        config.write_text(rewrite_text, encoding="utf-8")
        wait_for(lambda: live.now.memory.recall_top_k == 4, RELOAD_S, 0.05, "the fixed file applied")
    finally:
        watcher.stop()


def test_retrieval_settings_apply_to_the_next_recall(tmp_path, api):
    config = fake_config(tmp_path, api, retrieval={"doc_rrf_weight": 0.5, "channels": ["bm25", "vector"]})
    front = build_front(load_config(config))
    front.watcher = front.live.watch()
    query = {"query": "lighthouse keeper", "explain": True}
    try:
        with mcp_session(front.server) as s:
            s.ok("memorize", {"content": "the lighthouse keeper retired"})
            first = s.ok("recall", query)["results"][0]["explain"]
            assert set(first["channels"]) == {"bm25"}  # no vectors stored: the vector channel finds nothing
            assert first["parts"]["document"]["score"] == pytest.approx(
                0.5 * first["parts"]["document"]["fused"] + 0.25 * first["parts"]["document"]["importance"]
                + 0.25 * first["parts"]["document"]["recency"], abs=1e-5)
            rewrite(config, atomic=True, retrieval={"doc_rrf_weight": 0.9, "channels": ["vector"]})
            # The same query again: an answer cached under the old weights must not come back.
            wait_for(lambda: s.ok("recall", query)["results"] == [], RELOAD_S, 0.05, "bm25 switched off")
            rewrite(config, atomic=True, retrieval={"channels": ["bm25"]})
            wait_for(lambda: s.ok("recall", query)["results"], RELOAD_S, 0.05, "bm25 back on")
            parts = s.ok("recall", query)["results"][0]["explain"]["parts"]["document"]
            assert parts["score"] == pytest.approx(0.9 * parts["fused"] + 0.25 * parts["importance"]
                                                   + 0.25 * parts["recency"], abs=1e-5)
    finally:
        front.close()


def test_log_level_applies_live(tmp_path, api):
    config = fake_config(tmp_path, api, server={"log_level": "WARNING"})
    front = build_front(load_config(config))
    front.watcher = front.live.watch()
    root = logging.getLogger()
    before = root.level
    try:
        rewrite(config, server={"log_level": "DEBUG"})
        wait_for(lambda: root.level == logging.DEBUG, RELOAD_S, 0.05, "the root logger at DEBUG")
    finally:
        front.close()
        root.setLevel(before)


# -- the listed tools -----------------------------------------------------------------------

INITIAL_TOOLS = ["edit_memory", "list_memories", "memorize", "recall"]
NEW_TOOLS = ["memory_stats", "recall", "search_atoms"]


class Notifications:
    """What a handshake-era client's message handler received."""

    def __init__(self):
        self.tool_list_changed = threading.Event()

    async def __call__(self, message) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.tool_list_changed.set()


def start_listening(session):
    """Open a subscriptions/listen stream for tool list changes (a 2026-07-28 client);
    return a future resolving to the first event, once the server acknowledged it."""
    acked = threading.Event()

    async def first_event():
        async with session.client.listen(tools_list_changed=True) as events:
            acked.set()
            async for event in events:
                return event

    future = session._portal.start_task_soon(first_event)
    assert acked.wait(10), "the listen stream was not acknowledged"
    return future


@pytest.mark.slow
def test_exposed_tools_change_lists_the_new_set_and_notifies_a_listening_stdio_client(tmp_path, api):
    config = fake_config(tmp_path, api)
    with stdio_front(config) as (s, _):
        assert s.client.protocol_version == "2026-07-28"
        assert sorted(s.tool_names()) == INITIAL_TOOLS
        event = start_listening(s)
        rewrite(config, atomic=True, server={"exposed_tools": NEW_TOOLS})
        assert type(event.result(timeout=RELOAD_S)).__name__ == "ToolsListChanged"
        assert sorted(s.tool_names()) == NEW_TOOLS


@pytest.mark.slow
def test_exposed_tools_change_notifies_a_handshake_era_stdio_client(tmp_path, api):
    config = fake_config(tmp_path, api)
    heard = Notifications()
    with stdio_front(config, mode="legacy", message_handler=heard) as (s, _):
        assert s.client.server_capabilities.tools.list_changed is True
        assert sorted(s.tool_names()) == INITIAL_TOOLS
        rewrite(config, server={"exposed_tools": NEW_TOOLS})
        assert heard.tool_list_changed.wait(RELOAD_S)
        assert sorted(s.tool_names()) == NEW_TOOLS


@pytest.mark.slow
def test_exposed_tools_change_notifies_both_kinds_of_client_over_http(tmp_path, api):
    config = fake_config(tmp_path, api, server={"transport": "http"})
    heard = Notifications()
    with http_server(config, free_port()) as url, \
            mcp_session(Client(url)) as modern, \
            mcp_session(Client(url, mode="legacy", message_handler=heard)) as legacy:
        event = start_listening(modern)
        assert sorted(legacy.tool_names()) == INITIAL_TOOLS
        rewrite(config, atomic=True, server={"exposed_tools": NEW_TOOLS})
        assert type(event.result(timeout=RELOAD_S)).__name__ == "ToolsListChanged"
        assert heard.tool_list_changed.wait(RELOAD_S)
        assert sorted(modern.tool_names()) == sorted(legacy.tool_names()) == NEW_TOOLS


# -- the panel ------------------------------------------------------------------------------

@pytest.mark.slow
def test_panel_follows_the_config_file(tmp_path):
    import urllib.request

    from panel_helpers import panel_process

    config = write_config(tmp_path)
    with panel_process(config) as (url, token):
        # A page served means the app's start-up (which starts the watcher) has run.
        with urllib.request.urlopen(f"{url}/?token={token}", timeout=30) as page:
            assert page.status == 200
        rewrite(config, atomic=True, memory={"recall_top_k": 7})
        log = tmp_path / "panel-test.log"
        wait_for(lambda: lines_with(log, "applied memory.recall_top_k 5 -> 7"), RELOAD_S, 0.05,
                 what="the panel applying recall_top_k")


# -- workers --------------------------------------------------------------------------------

def embed_delay(config: Path, memory_id: int) -> float | None:
    """The backoff the worker gave a failed embed stage (None while it has not failed)."""
    rows = db_rows(config, "SELECT next_attempt_time - update_time FROM memory_stages"
                           " WHERE memory_id = ? AND stage = 'embed' AND attempts >= 1"
                           " AND status = 'pending'", (memory_id,))
    return rows[0][0] if rows else None


def test_worker_takes_a_saved_retry_base_s_for_the_next_failure(tmp_path, api, caplog):
    """The worker built in this process as aokun-worker builds it, following the file with its
    own watcher; its runner runs the embed stage, which fails."""
    from aokun_worker.service import WorkerService
    from shared.assembly import open_services

    api.fail_next = 10 ** 6  # every embedding request fails
    config = fake_config(tmp_path, api, queue={"retry_base_s": 1000, "retry_max_s": 5000})
    service = WorkerService(open_services(load_config(config), queued=False))
    watcher = service.live.watch()
    caplog.set_level(logging.INFO, logger="aokun.config")
    try:
        first = service.memories.memorize("the first note", MemoryFields()).id
        assert service.runner.run_next("embed") == (1, 0)
        assert embed_delay(config, first) == pytest.approx(1000)
        rewrite(config, queue={"retry_base_s": 2})
        wait_for(lambda: service.runner.parts.queue.retry_base_s == 2, RELOAD_S, 0.05,
                 what="the worker applying retry_base_s")
        assert any("applied queue.retry_base_s 1000.0 -> 2.0" in r.getMessage() for r in caplog.records)
        second = service.memories.memorize("the second note", MemoryFields()).id
        assert service.runner.run_next("embed") == (1, 0)  # the second only: the first waits 1000 s
        assert embed_delay(config, second) == pytest.approx(2)
    finally:
        watcher.stop()
        service.services.close()


def test_worker_rebuilds_what_it_built_from_live_settings(tmp_path, api):
    from aokun_worker.service import WorkerService
    from shared.assembly import open_services

    config = fake_config(tmp_path, api)
    loaded = load_config(config)
    service = WorkerService(open_services(loaded, queued=False))
    watcher = service.live.watch()
    try:
        rewrite(config, atoms={"reinforce_jaccard": 0.9, "ttl_factual_days": 10},
                queue={"lease_s": 77, "retry_base_s": 3, "reconcile_interval_s": 42, "embed_batch_size": 4},
                forgetting={"atom_maintenance_interval_hours": 2}, backup={"daily": False})
        wait_for(lambda: service.runner.parts.queue.lease_s == 77, RELOAD_S, 0.05, "queue settings applied")
        handlers = service.runner.parts.handlers
        assert handlers["atoms"].config.reinforce_jaccard == 0.9
        assert handlers["atoms"].ttl_for("factual", 0.5, 0) == service.memories.ttl_for("factual", 0.5, 0) == 10
        assert handlers["embed"].batch_size == 4
        assert service.runner.retry_delay(2) == 6
        intervals = {job.name: job.interval_s for job in service.scheduler.jobs}
        assert intervals["reconcile"] == 42 and intervals["atoms"] == 7200 and "backup" not in intervals
    finally:
        watcher.stop()
        service.store.close()


def kill_workers(config: Path) -> None:
    pids = {row[0] for row in db_rows(config, "SELECT pid FROM workers")}
    pids |= set(read_pid_files(config.parent / "data"))
    for pid in pids:
        if platform.pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_autostart_turned_on_starts_a_worker_which_follows_a_saved_idle_exit(tmp_path, api):
    config = fake_config(tmp_path, api, worker={"autostart": False, "idle_exit_s": 600,
                                                "heartbeat_interval_s": 0.5})
    try:
        with stdio_front(config):
            rewrite(config, worker={"autostart": True})
            wait_for(lambda: db_rows(config, "SELECT autostarted FROM workers") == [(1,)], 30,
                     what="an autostarted worker")
            rewrite(config, worker={"idle_exit_s": 1})
            worker_log = tmp_path / "data" / "worker.log"
            wait_for(lambda: lines_with(worker_log, "applied worker.idle_exit_s 600.0 -> 1.0"), 10,
                     what="the worker applying idle_exit_s")
            time.sleep(2)  # idle_exit_s passes, but a front is alive: the worker stays
            assert len(db_rows(config, "SELECT pid FROM workers")) == 1
        # With 600 s it would wait ten minutes; with 1 s it goes once the front's beat is stale.
        wait_for(lambda: db_rows(config, "SELECT COUNT(*) FROM workers") == [(0,)], 20,
                 what="the idle worker exiting")
    finally:
        kill_workers(config)


def test_a_process_on_defaults_follows_the_config_file_created_for_it(tmp_path, monkeypatch):
    """The panel's settings page creates ./config.yaml when processes ran on defaults: they
    take it up without a restart."""
    from shared.config import load_config
    from shared.live_config import LiveConfig

    monkeypatch.chdir(tmp_path)
    live = LiveConfig(load_config(env={}))
    assert live.now.source is None and live.now.memory.recall_top_k == 5
    watcher = live.watch()
    try:
        (tmp_path / "config.yaml").write_text("memory:\n  recall_top_k: 2\n", encoding="utf-8")
        wait_for(lambda: live.now.memory.recall_top_k == 2, RELOAD_S, 0.05, "the created file applied")
    finally:
        watcher.stop()


# -- half-written files ---------------------------------------------------------------------

FULL = {"storage": {"data_dir": "data"}, "worker": {"autostart": False},
        "memory": {"recall_top_k": 7}, "server": {"exposed_tools": ["memorize", "recall"]},
        "forgetting": {"auto_cleanup_enabled": False}}


def full_text(**memory) -> str:
    raw = {**FULL, "memory": {**FULL["memory"], **memory}}
    return yaml.safe_dump(raw, sort_keys=False)


def live_values(live: LiveConfig) -> tuple:
    c = live.now
    return c.memory.recall_top_k, tuple(c.server.exposed_tools), c.forgetting.auto_cleanup_enabled


def test_reload_refuses_an_empty_or_cut_off_file_and_applies_a_complete_one(tmp_path, caplog):
    config = tmp_path / "config.yaml"
    config.write_text(full_text(), encoding="utf-8")
    live = LiveConfig(load_config(config))
    before = live_values(live)
    assert before == (7, ("memorize", "recall"), False)
    caplog.set_level(logging.INFO, logger="aokun.config")
    text = full_text()
    cut = text[:text.index("server:")]  # cut at a line: valid YAML, sections missing
    for partial, problem in [("", "is empty"), ("\n# saving...\n", "is empty"),
                             (cut, "lacks the section(s) server, forgetting it had"),
                             (text.replace("  auto_cleanup_enabled: false\n", ""),
                              "has no keys in the section(s) forgetting")]:
        config.write_text(partial, encoding="utf-8")
        caplog.clear()
        assert live.reload() is None
        assert live_values(live) == before
        [line] = [r.getMessage() for r in caplog.records]
        assert f"it {problem} (half-written?)" in line and str(config) in line
    config.write_text(full_text(recall_top_k=4), encoding="utf-8")
    assert live.reload() == {"memory.recall_top_k": (7, 4)}
    assert live_values(live) == (4, ("memorize", "recall"), False)
    # A key removed from a section still there applies: that is how a key goes back to its default.
    config.write_text(yaml.safe_dump({**FULL, "memory": {"recall_top_k": 4}, "forgetting": {"decay_rate": 0.01}}),
                      encoding="utf-8")
    assert live.reload() == {"forgetting.auto_cleanup_enabled": (False, True)}


def test_a_watcher_skips_an_empty_then_truncated_file_and_applies_the_complete_one(tmp_path, caplog):
    config = tmp_path / "config.yaml"
    config.write_text(full_text(), encoding="utf-8")
    live = LiveConfig(load_config(config))
    watcher = live.watch()
    caplog.set_level(logging.INFO, logger="aokun.config")
    try:
        config.write_text("", encoding="utf-8")
        wait_for(lambda: any("is empty" in r.getMessage() for r in caplog.records), RELOAD_S, 0.05,
                 "the empty file reported")
        text = full_text(recall_top_k=3)
        config.write_text(text[:text.index("server:")], encoding="utf-8")
        wait_for(lambda: any("lacks the section(s)" in r.getMessage() for r in caplog.records), RELOAD_S,
                 0.05, "the truncated file reported")
        assert live_values(live) == (7, ("memorize", "recall"), False)
        config.write_text(text, encoding="utf-8")
        wait_for(lambda: live.now.memory.recall_top_k == 3, RELOAD_S, 0.05, "the complete file applied")
        assert live_values(live) == (3, ("memorize", "recall"), False)
    finally:
        watcher.stop()


def test_a_section_removed_on_purpose_applies_once_the_file_has_settled(tmp_path, caplog):
    """A cut-off file and a file whose section was deleted look alike at first; the deleted
    section is meant when the file stays so: it applies SETTLE_S later, with no other save."""
    from shared.live_config import INCOMPLETE_SETTLE_S as SETTLE_S

    config = tmp_path / "config.yaml"
    config.write_text(full_text(), encoding="utf-8")
    live = LiveConfig(load_config(config))
    watcher = live.watch()
    caplog.set_level(logging.INFO, logger="aokun.config")
    try:
        without = {name: keys for name, keys in FULL.items() if name != "forgetting"}
        config.write_text(yaml.safe_dump({**without, "memory": {"recall_top_k": 5}}), encoding="utf-8")
        wait_for(lambda: any("lacks the section(s) forgetting" in r.getMessage() for r in caplog.records),
                 RELOAD_S, 0.05, "the missing section reported first")
        assert live_values(live) == (7, ("memorize", "recall"), False)
        wait_for(lambda: live_values(live) == (5, ("memorize", "recall"), True), SETTLE_S + RELOAD_S, 0.05,
                 "the settled file applied, the removed section back at its defaults")
        # An empty file is never taken for a wish: it stays refused however long it stays.
        config.write_text("", encoding="utf-8")
        time.sleep(SETTLE_S + 1.0)
        assert live_values(live) == (5, ("memorize", "recall"), True)
    finally:
        watcher.stop()
