"""Every key that applies live reaches every process kind that uses it.

A front, a worker and a panel are built in this process by their own packages' builders (the
same code their `main` runs), over one data_dir and one config file. For each live key the file
is rewritten with that key changed (and every other key at its baseline) and each process
applies it as its watcher does once the file has settled (`LiveConfig.reload`; that each
process's own watcher follows the file is tested once here, and the watcher's settling in
tests/process/test_live_reload.py), then the test looks at what the process does with it:
the recall the front and the panel answer, the memory their memory services write, the shelf
life an atom is given, the worker's stage handlers, queue settings and periodic jobs, the tools
the front lists, the upkeep each runs.

`test_every_live_key_has_a_probe` keeps the table whole: a new live key must say here which
processes use it and how that shows.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from aokun_panel.app import build_app, build_context
from aokun_panel.context import PanelContext
from aokun_server.app import Front, build_front
from aokun_worker.service import WorkerService
from fake_openai import FakeEmbeddingsServer
from helpers import mcp_session, wait_for, write_config
from shared.assembly import Services, open_services
from shared.config import AppConfig, AtomsConfig, load_config, needs_restart
from shared.errors import InvalidInput
from shared.extract.atomize import ttl_days
from shared.live_config import LiveConfig
from shared.store.model.documents import DocumentFilter, MemoryFields
from shared.store.model.graph import MemoryGraph, NodeSpec
from shared.time_zone import user_zone

RELOAD_S = 60.0  # a deadline for a saved change to arrive, not a speed
WORD = "lantern"
SEEDED = 9
PANEL_TOKEN = "live-keys-token"
PANEL_PORT = 8765


@dataclass
class Processes:
    config: Path
    baseline: dict
    front: Front
    worker: WorkerService
    panel: PanelContext
    panel_app: Any

    def services(self, kind: str) -> Services:
        return getattr(self, kind).services

    def lives(self) -> dict[str, LiveConfig]:
        return {kind: self.services(kind).live for kind in ("front", "worker", "panel")}


def live_keys() -> list[str]:
    defaults = AppConfig()
    return [f"{section.name}.{key.name}" for section in dataclasses.fields(defaults)
            if section.name != "source"
            for key in dataclasses.fields(getattr(defaults, section.name))
            if not needs_restart(f"{section.name}.{key.name}")]


def a_key_in_every_section() -> dict[str, dict]:
    """{section: {a key of it with a plain default: that default}} for each section. With a key
    in every section of the baseline, going back to it after a test added a key never leaves a
    section out or empty, which a watcher takes for a half-written file and applies only once it
    has stayed so for INCOMPLETE_SETTLE_S (test_live_reload tests that)."""
    defaults = AppConfig()
    sections = {}
    for section in dataclasses.fields(defaults):
        if section.name == "source":
            continue
        values = dataclasses.asdict(getattr(defaults, section.name))
        name, value = next((name, value) for name, value in values.items()
                           if type(value) in (bool, int, float, str, tuple))
        sections[section.name] = {name: list(value) if isinstance(value, tuple) else value}
    return sections


@pytest.fixture(scope="module")
def processes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("live-keys")
    with FakeEmbeddingsServer(dim=16) as api:
        embedding = {"provider": "openai", "base_url": api.base_url, "model": "fake",
                     "dimensions": api.dim, "api_key": "sk-test", "max_retries": 0}
        # A summarizer endpoint in the baseline, so that provider "llm" is a valid change;
        # write_config's own keys (data_dir, no autostarted worker) kept over the defaults.
        sections = a_key_in_every_section()
        for name in ("storage", "worker"):
            del sections[name]
        config = write_config(folder, **{**sections, "embedding": {**sections["embedding"], **embedding},
                                         "summarizer": {**sections["summarizer"], "base_url": "http://127.0.0.1:9/v1",
                                                        "model": "m"}})
        baseline = yaml.safe_load(config.read_text(encoding="utf-8"))
        loaded = load_config(config)
        front = build_front(loaded)
        worker = WorkerService(open_services(loaded, queued=False))
        panel = build_context(LiveConfig(load_config(config)), PANEL_TOKEN)
        panel_app = build_app(panel, PANEL_TOKEN, PANEL_PORT)
        for i in range(SEEDED):
            front.memories.memorize(f"the {WORD} number {i} hangs by the door",
                                    MemoryFields(persona_id="seeded"))
        level = logging.getLogger().level
        try:
            yield Processes(config, baseline, front, worker, panel, panel_app)
        finally:
            logging.getLogger().setLevel(level)
            for services in (front.services, worker.services, panel.services):
                services.close()


def save_with(processes: Processes, key: str, value: Any) -> None:
    """The baseline file with one key changed, saved as the panel saves (temp file + rename),
    then applied by every process as its watcher applies a settled file."""
    write_with(processes, key, value)
    for kind, live in processes.lives().items():
        assert live.reload() is not None, f"{kind} refused the saved file"
        assert _current(live, key) == _as_config(value), f"{kind} did not take {key} = {value!r}"


def write_with(processes: Processes, key: str, value: Any) -> None:
    section, name = key.split(".")
    raw = yaml.safe_load(yaml.safe_dump(processes.baseline))
    raw.setdefault(section, {})[name] = list(value) if isinstance(value, tuple) else value
    temp = processes.config.with_name(".config.yaml.saving")
    temp.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    temp.replace(processes.config)


def _as_config(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _current(live: LiveConfig, key: str) -> Any:
    section, name = key.split(".")
    value = getattr(getattr(live.now, section), name)
    return str(value) if isinstance(value, Path) else value


# -- how each kind of process shows a key ---------------------------------------------------


def recaller_uses(services: Services, key: str, value: Any) -> None:
    """The recaller that answers the next recall was built with the new value."""
    recaller = services.recaller.current
    name = key.split(".")[1]
    assert getattr(recaller.config, name) == _as_config(value)
    if name == "channels":
        assert [channel.name for channel in recaller.channels] == list(value)
    if name == "cache_enabled":
        assert (recaller.cache is not None) == value
    if name in ("cache_ttl_s", "cache_size") and recaller.cache is not None:
        assert getattr(recaller.cache, name.removeprefix("cache_")) == value


def front_recall_count(processes: Processes, key: str, value: Any) -> None:
    with mcp_session(processes.front.server) as session:
        found = session.ok("recall", {"query": WORD, "persona_id": "seeded", "min_score": 0})
    assert len(found["results"]) == value


def panel_recall_count(processes: Processes, key: str, value: Any) -> None:
    from starlette.testclient import TestClient

    with TestClient(processes.panel_app, base_url=f"http://127.0.0.1:{PANEL_PORT}") as client:
        client.get(f"/?token={PANEL_TOKEN}")
        page = client.get("/memories", params={"q": WORD, "persona": "seeded"})
    assert page.status_code == 200
    assert page.text.count('class="hit"') == value


def front_max_k(processes: Processes, key: str, value: Any) -> None:
    with mcp_session(processes.front.server) as session:
        session.ok("recall", {"query": WORD, "k": value})
        assert str(value) in session.error("recall", {"query": WORD, "k": value + 1})


def context_follows(services: Services, key: str, value: Any) -> None:
    """Two turns ten minutes apart: the second is indexed with the first only while
    context_turns > 0 and the gap fits context_window_s."""
    persona = f"context-{time.monotonic_ns()}"
    start = time.time() - 3600
    memories = services.memories
    first = memories.memorize("the first turn mentions a porcupine", MemoryFields(
        persona_id=persona, session_id="s", original_time=_moment(start)))
    second = memories.memorize("the second turn is short", MemoryFields(
        persona_id=persona, session_id="s", original_time=_moment(start + 600)))
    found = services.store.documents.bm25(["porcupine"], DocumentFilter(persona_id=persona), 10)
    assert {i for i, _ in found} == {first.id}, "the new setting keeps the second turn alone"
    assert second.id not in {i for i, _ in found}


def _moment(epoch: float):
    from datetime import datetime, timezone

    return datetime.fromtimestamp(epoch, timezone.utc)


def front_default_persona(processes: Processes, key: str, value: Any) -> None:
    with mcp_session(processes.front.server) as session:
        stored = session.ok("memorize", {"content": f"a {WORD} with no persona named"})
    assert stored["persona_id"] == value


def panel_graph_opens_on_default(processes: Processes, key: str, value: Any) -> None:
    """The graph page opens on the default persona's graph (one persona's, with fewer
    memories than the seeded one's)."""
    from starlette.testclient import TestClient

    store = processes.panel.services.store
    memory = processes.panel.services.memories.memorize(f"{WORD} kept by Ada", MemoryFields(persona_id=value))
    ada = NodeSpec("person", "Ada", "ada")
    with store.write() as tx:
        tx.graph.replace_for_memory(memory.id, value, MemoryGraph([ada], [], []), "h", 1.0)
    with TestClient(processes.panel_app, base_url=f"http://127.0.0.1:{PANEL_PORT}") as client:
        client.get(f"/?token={PANEL_TOKEN}")
        page = client.get("/graph")
    assert page.status_code == 200
    assert f'<option value="{value}" selected>' in page.text


def content_limit(services: Services, key: str, value: Any) -> None:
    services.memories.memorize("x" * value, MemoryFields(persona_id="limit"))
    with pytest.raises(InvalidInput, match=str(value)):
        services.memories.memorize("x" * (value + 1), MemoryFields(persona_id="limit"))


def listed_tools(processes: Processes, key: str, value: Any) -> None:
    with mcp_session(processes.front.server) as session:
        assert set(session.tool_names()) == set(value)


def log_level(services: Services, key: str, value: Any) -> None:
    assert logging.getLogger().level == logging.getLevelName(value)


def shelf_life(services: Services, key: str, value: Any) -> None:
    atom_type = key.split(".")[1].removeprefix("ttl_").removesuffix("_days")
    expected = ttl_days(atom_type, 0.5, 0, dataclasses.replace(AtomsConfig(), **{key.split(".")[1]: value}))
    assert services.memories.ttl_for(atom_type, 0.5, 0) == expected
    assert expected != ttl_days(atom_type, 0.5, 0, AtomsConfig())


def worker_atoms_handler(processes: Processes, key: str, value: Any) -> None:
    handler = processes.worker.runner.parts.handlers["atoms"]
    assert getattr(handler.config, key.split(".")[1]) == value


def worker_queue(processes: Processes, key: str, value: Any) -> None:
    name = key.split(".")[1]
    parts = processes.worker.runner.parts
    assert getattr(parts.queue, name) == value
    if name == "embed_batch_size":
        assert parts.handlers["embed"].batch_size == value
    if name == "reconcile_interval_s":
        assert _job(processes.worker, "reconcile").interval_s == value


def _job(worker: WorkerService, name: str):
    return next(job for job in worker.scheduler.jobs if job.name == name)


def worker_atom_sweep_interval(processes: Processes, key: str, value: Any) -> None:
    assert _job(processes.worker, "atoms").interval_s == value * 3600


def worker_daily_backup(processes: Processes, key: str, value: Any) -> None:
    assert any(job.name == "backup" for job in processes.worker.scheduler.jobs) == value


def archive_switch(services: Services, key: str, value: Any) -> None:
    assert services.lifecycle.archive(time.time())["enabled"] is value


def lifecycle_reads(services: Services, key: str, value: Any) -> None:
    """Upkeep that reads the key when it runs (decay, the sweep, backups) sees the new one."""
    section, name = key.split(".")
    assert getattr(getattr(services.lifecycle.live.now, section), name) == _as_config(value)


def backup_dir(services: Services, key: str, value: Any) -> None:
    assert services.lifecycle.backup_dir() == Path(value)


def summarizer_reads(services: Services, key: str, value: Any) -> None:
    assert getattr(services.summarizer.settings(), key.split(".")[1]) == _as_config(value)


def reinforcement(processes: Processes, key: str, value: Any) -> None:
    """A recalled memory is reinforced after the answer only while the key is on."""
    front = processes.front
    doc = front.memories.memorize(f"a {WORD} to reinforce", MemoryFields(persona_id="reinforced"))
    front.reinforcer.touch([doc.id])
    # The reinforcer's one thread runs touches in order: once this no-op has run, so has any
    # touch submitted before it.
    front.reinforcer._executor.submit(lambda: None).result(timeout=RELOAD_S)
    assert front.services.store.documents.get(doc.id).access_count == (1 if value else 0)


def front_autostart(processes: Processes, key: str, value: Any) -> None:
    assert processes.front.live.now.worker.autostart is value


def front_sessions(processes: Processes, key: str, value: Any) -> None:
    """The HTTP gate reads the front's current server section for each new session
    (aokun_server/http.py); tests/process/test_http_sessions.py shows what it does with it."""
    assert getattr(processes.front.live.now.server, key.split(".")[1]) == value


def user_clock(services: Services, key: str, value: Any) -> None:
    """A memory without an original time is marked with its stored time on the user's clock."""
    assert services.memories.zone() == user_zone(value)
    doc = services.memories.memorize("marked on the user's clock", MemoryFields(persona_id="clock"))
    marked = datetime.fromtimestamp(doc.create_time, user_zone(value))
    assert doc.text.startswith(f"[{marked:%Y-%m-%d %H:%M}]") or doc.text.startswith(f"[{marked:%Y-%m-%d}]")


def worker_atoms_zone(processes: Processes, key: str, value: Any) -> None:
    assert processes.worker.runner.parts.handlers["atoms"].zone == user_zone(value)


def worker_idle_exit(processes: Processes, key: str, value: Any) -> None:
    assert processes.worker.live.now.worker.idle_exit_s == value


Probe = Callable[..., None]
EACH = ("front", "worker", "panel")
WRITERS = ("front", "worker", "panel")  # each holds a memory service


def on_services(probe: Probe, *kinds: str) -> dict[str, Probe]:
    return {kind: (lambda p, key, value, probe=probe, kind=kind: probe(p.services(kind), key, value))
            for kind in kinds}


def probes_for(key: str) -> dict[str, Probe]:
    """kind -> how that process shows the key."""
    section, _name = key.split(".")
    specific = {
        "memory.recall_top_k": {"front": front_recall_count, "panel": panel_recall_count},
        "memory.recall_max_k": {"front": front_max_k},
        "memory.context_turns": on_services(context_follows, *WRITERS),
        "memory.context_window_s": on_services(context_follows, *WRITERS),
        "memory.default_persona": {"front": front_default_persona, "panel": panel_graph_opens_on_default},
        "server.max_content_chars": on_services(content_limit, *WRITERS),
        "memory.time_zone": {**on_services(user_clock, *WRITERS), "worker-handler": worker_atoms_zone},
        "server.exposed_tools": {"front": listed_tools},
        "server.log_level": on_services(log_level, "front", "panel"),
        "retrieval.access_reinforcement": {"front": reinforcement},
        "atoms.reinforce_jaccard": {"worker": worker_atoms_handler},
        "forgetting.auto_cleanup_enabled": on_services(archive_switch, "front", "worker"),
        "forgetting.atom_maintenance_interval_hours": {"worker": worker_atom_sweep_interval},
        "backup.dir": on_services(backup_dir, "front", "worker"),
        "backup.daily": {"worker": worker_daily_backup},
        "worker.autostart": {"front": front_autostart},
        "worker.idle_exit_s": {"worker": worker_idle_exit},
        "server.session_idle_timeout_s": {"front": front_sessions},
        "server.max_sessions_per_token": {"front": front_sessions},
    }
    if key in specific:
        return specific[key]
    if section == "retrieval":
        return on_services(recaller_uses, "front", "panel")
    if section == "atoms":  # ttl_*_days
        return {**on_services(shelf_life, *WRITERS), "worker-handler": worker_atoms_handler}
    if section == "queue":
        return {"worker": worker_queue}
    if section in ("forgetting", "backup"):
        return on_services(lifecycle_reads, "front", "worker")
    if section == "summarizer":
        return on_services(summarizer_reads, "front")
    return {}


NEW_VALUES = {
    "server.exposed_tools": ("memorize", "recall", "memory_stats"),
    "server.max_content_chars": 300,
    "server.log_level": "ERROR",
    "memory.recall_top_k": 3,
    "memory.recall_max_k": 6,
    "memory.context_turns": 0,
    "memory.context_window_s": 60.0,
    "memory.time_zone": "America/Los_Angeles",
    "retrieval.channels": ("bm25", "graph_keyword"),
    "backup.dir": "/tmp/aokun-live-keys-backups",
    "summarizer.provider": "llm",
    "summarizer.base_url": "http://127.0.0.1:10/v1",
    "summarizer.api_key_env": "AOKUN_LIVE_KEYS_TEST_KEY",
}


def new_value(key: str) -> Any:
    """A valid value other than the default."""
    if key in NEW_VALUES:
        return NEW_VALUES[key]
    section, name = key.split(".")
    owner = getattr(AppConfig(), section)
    field = next(f for f in dataclasses.fields(owner) if f.name == name)
    default, rules = getattr(owner, name), field.metadata
    if rules.get("choices"):
        return next(choice for choice in rules["choices"] if choice != default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, (int, float)):
        low, high = rules.get("min"), rules.get("max")
        if high is None:
            changed = default * 2 + 1
        elif low is not None and default > low:
            changed = (default + low) / 2
        else:
            changed = (default + high) / 2
        changed = type(default)(changed)
        assert changed != default, key
        return changed
    if isinstance(default, tuple):
        return default[:-1] if len(default) > 1 else ("changed",)
    if isinstance(default, str):
        return "changed"
    raise AssertionError(f"no new value for {key}: give one in NEW_VALUES")


def test_each_process_follows_the_saved_file_with_its_own_watcher(processes):
    key, value = "memory.recall_top_k", new_value("memory.recall_top_k")
    watchers = [live.watch() for live in processes.lives().values()]
    try:
        write_with(processes, key, value)
        for kind, live in processes.lives().items():
            wait_for(lambda live=live: _current(live, key) == value, RELOAD_S, 0.02, f"{kind} taking {key} = {value}")
    finally:
        for watcher in watchers:
            if watcher is not None:
                watcher.stop()
        save_with(processes, key, AppConfig().memory.recall_top_k)


def test_every_live_key_has_a_probe():
    assert [key for key in live_keys() if not probes_for(key)] == []


@pytest.mark.slow
@pytest.mark.parametrize("key", live_keys())
def test_a_saved_live_key_reaches_every_process_that_uses_it(processes, key):
    value = new_value(key)
    save_with(processes, key, value)
    for kind, probe in probes_for(key).items():
        try:
            probe(processes, key, value)
        except AssertionError as exc:
            raise AssertionError(f"{kind}: {key} = {value!r} not in effect: {exc}") from exc
