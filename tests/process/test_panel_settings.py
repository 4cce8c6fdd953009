"""Settings: config.example.yaml's keys described by its comments, and saves that keep the
user's file as it was written; the settings page in a real browser against a real panel."""

from __future__ import annotations

import dataclasses
import os
import stat
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from aokun_panel.config_file import EXAMPLE_PATH, example_settings, save_settings, write_atomically
from shared.config import AppConfig, load_config
from shared.errors import ConfigError

NOW = datetime(2026, 12, 1, 15, 30, 0)


def comments(text: str) -> list[str]:
    """Every comment in a YAML text, in order (the example has no '#' inside values)."""
    return [line[line.index("#"):].strip() for line in text.splitlines() if "#" in line]


def key_order(text: str) -> list[str]:
    return [f"{s}.{k}" for s, keys in yaml.safe_load(text).items() for k in (keys or {})]


def user_copy(folder: Path) -> Path:
    """The example as a user keeps it (scripts/run copies it), without an autostarted worker."""
    text = EXAMPLE_PATH.read_text(encoding="utf-8")
    assert "  autostart: true " in text
    path = folder / "config.yaml"
    path.write_text(text.replace("  autostart: true ", "  autostart: false"), encoding="utf-8")
    return path


def others(folder: Path, keep: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p != keep and p.name != "data")


# -- the descriptions ---------------------------------------------------------------------

def test_every_key_of_the_example_has_a_description_and_fitting_input():
    sections = example_settings()
    expected = [f.name for f in dataclasses.fields(AppConfig) if f.name != "source"]
    assert sorted(sections) == sorted(expected)
    described = {s.key: s for settings in sections.values() for s in settings}
    for key, setting in described.items():
        assert len(setting.description) > 8, f"{key} has no description in config.example.yaml"
    top_k = described["memory.recall_top_k"]
    assert (top_k.kind, top_k.minimum, top_k.default, top_k.restart) == ("int", 1, 5, False)
    assert top_k.description == "results when recall is called without k"
    assert described["retrieval.channels"].kind == "subset"
    assert described["retrieval.channels"].choices == ("bm25", "vector", "graph_keyword", "graph_vector")
    assert described["retrieval.temporal_cues"].kind == "words"
    assert described["server.log_level"].kind == "choice"
    assert described["retrieval.mmr_enabled"].kind == "bool"
    assert described["retrieval.mmr_lambda"].maximum == 1.0
    assert described["storage.data_dir"].kind == "path" and described["storage.data_dir"].restart
    # A continuation line belongs to its key; lines above a key that has its own comment head a group.
    assert described["server.token"].description.endswith("($AOKUN_SERVER_TOKEN overrides this)")
    assert described["retrieval.doc_fusion"].note.startswith("document route:")
    assert described["retrieval.doc_fusion"].description.startswith("zscore (each channel standardised")
    assert described["retrieval.relational_cues"].description.startswith("words or phrases")


# -- saving -------------------------------------------------------------------------------

def test_a_save_changes_one_line_and_keeps_every_comment(tmp_path):
    path = user_copy(tmp_path)
    before = path.read_text(encoding="utf-8")
    receipt = save_settings(path, {"memory.recall_top_k": 3}, now=NOW)
    after = path.read_text(encoding="utf-8")
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(before.splitlines()) == len(after.splitlines())
    assert changed == [("  recall_top_k: 5           # results when recall is called without k",
                        "  recall_top_k: 3           # results when recall is called without k")]
    assert comments(after) == comments(before) and key_order(after) == key_order(before)
    assert load_config(path, env={}).memory.recall_top_k == 3
    assert receipt.saved == ("memory.recall_top_k",) and receipt.live == ["memory.recall_top_k"]
    assert receipt.backup == tmp_path / "config.yaml.2026-12-01T15-30-00.bak"
    assert receipt.backup.read_text(encoding="utf-8") == before
    # Saving the same value again writes nothing and keeps no further copy.
    assert save_settings(path, {"memory.recall_top_k": 3}, now=NOW).saved == ()
    assert others(tmp_path, path) == ["config.yaml.2026-12-01T15-30-00.bak"]
    save_settings(path, {"memory.recall_top_k": 4}, now=NOW)
    assert others(tmp_path, path) == ["config.yaml.2026-12-01T15-30-00-2.bak",
                                      "config.yaml.2026-12-01T15-30-00.bak"]


def test_lists_are_saved_as_yaml_lists_in_the_file_style(tmp_path):
    path = user_copy(tmp_path)
    save_settings(path, {"retrieval.temporal_cues": ["when", "last time", "上次", "no", "on"],
                         "server.exposed_tools": ["memorize", "recall"]}, now=NOW)
    text = path.read_text(encoding="utf-8")
    # One line each, as the file had them; words pyyaml would read as booleans are quoted.
    assert '  temporal_cues: [when, last time, 上次, "no", "on"]\n' in text
    assert "  exposed_tools: [memorize, recall]" in text
    config = load_config(path, env={})
    assert config.retrieval.temporal_cues == ("when", "last time", "上次", "no", "on")
    # A block list keeps its style, the comments of the items that stay and what follows it.
    path.write_text("server:\n  exposed_tools:   # mine\n  - memorize  # m\n  - recall    # r\n"
                    "\n  # the port\n  port: 9000\n", encoding="utf-8")
    save_settings(path, {"server.exposed_tools": ["recall", "delete_memory"]}, now=NOW)
    assert path.read_text(encoding="utf-8") == (
        "server:\n  exposed_tools:   # mine\n  - recall    # r\n  - delete_memory\n"
        "\n  # the port\n  port: 9000\n")


def test_a_refused_value_writes_nothing(tmp_path):
    path = user_copy(tmp_path)
    before = path.read_bytes()
    for changes, message in [
        ({"memory.recall_top_k": 0}, "memory.recall_top_k must be >= 1, got 0"),
        ({"memory.recall_top_k": 20}, "memory.recall_top_k (20) must not exceed memory.recall_max_k (15)"),
        ({"memory.recall_top_k": "3"}, "memory.recall_top_k must be an integer, got '3'"),
        ({"retrieval.channels": ["bm25", "grep"]}, "unknown value(s) grep"),
        ({"memory.recal_top_k": 3}, "unknown config key memory.recal_top_k"),
        ({"recall_top_k": 3}, "setting names look like section.key"),
    ]:
        with pytest.raises(ConfigError) as refused:
            save_settings(path, changes, now=NOW)
        assert message in str(refused.value)
        assert path.read_bytes() == before
    assert others(tmp_path, path) == []


def test_missing_keys_and_sections_go_where_the_example_has_them(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("storage:\n  data_dir: data  # mine\n\n# no worker of its own\nworker:\n"
                    "  autostart: false\nretrieval:\n  rrf_k: 60\n  bm25_weight: 0.6\n", encoding="utf-8")
    save_settings(path, {"memory.recall_top_k": 3, "retrieval.doc_fusion": "rrf",
                         "storage.synchronous": "normal"}, now=NOW)
    text = path.read_text(encoding="utf-8")
    assert text == (
        "storage:\n  data_dir: data  # mine\n"
        "  synchronous: normal # full (fsync each commit: an acknowledged memory survives power loss) | normal\n"
        "\nmemory:\n  recall_top_k: 3  # results when recall is called without k\n"
        "\n# no worker of its own\nworker:\n  autostart: false\n"
        "retrieval:\n  rrf_k: 60\n"
        "  doc_fusion: rrf  # zscore (each channel standardised by its own score spread, then weighted)"
        " | score (weighted min-max) | rrf\n"
        "  bm25_weight: 0.6\n")
    assert load_config(path, env={}).retrieval.doc_fusion == "rrf"


def test_without_a_file_the_example_is_written_with_the_change(tmp_path):
    path = tmp_path / "config.yaml"
    receipt = save_settings(path, {"memory.recall_top_k": 4}, now=NOW)
    assert receipt.created and receipt.backup is None
    example = EXAMPLE_PATH.read_text(encoding="utf-8")
    assert path.read_text(encoding="utf-8") == example.replace("  recall_top_k: 5 ", "  recall_top_k: 4 ")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert others(tmp_path, path) == []


def test_an_atomic_write_leaves_no_temporary_file(tmp_path):
    path = user_copy(tmp_path)
    os.chmod(path, 0o600)
    write_atomically(path, "memory:\n  recall_top_k: 2\n")
    assert path.read_text() == "memory:\n  recall_top_k: 2\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the file keeps its permissions
    assert others(tmp_path, path) == []
    # A write that fails (here os.replace onto a folder that is not empty) leaves no temporary file.
    folder = tmp_path / "taken"
    (folder / "inside").mkdir(parents=True)
    with pytest.raises(OSError):
        write_atomically(folder, "x: 1\n")
    assert others(tmp_path, path) == ["taken"] and os.listdir(folder) == ["inside"]


# -- the page, in a real browser ----------------------------------------------------------

@pytest.fixture
def panel(tmp_path):
    from panel_helpers import panel_process

    path = user_copy(tmp_path)
    with panel_process(path) as (url, token):
        yield path, url, token


def test_saving_keeps_only_the_last_five_backups(tmp_path):
    path = user_copy(tmp_path)
    stamps = [datetime(2026, 12, 1, 15, 30, 0), *(datetime(2026, 12, 1, 15, 30, 0) for _ in range(3)),
              *(datetime(2026, 12, 2, 9, minute, 0) for minute in range(4))]
    made = [save_settings(path, {"memory.recall_top_k": 2 + i % 2}, now=stamp).backup
            for i, stamp in enumerate(stamps)]
    kept = sorted(p.name for p in tmp_path.glob("config.yaml.*.bak"))
    # Newest by the time in the name (copies within one second are -2, -3...).
    assert kept == sorted(p.name for p in made[-5:]), kept
    assert "config.yaml.2026-12-01T15-30-00-4.bak" in kept and "config.yaml.2026-12-01T15-30-00-3.bak" not in kept
    other = tmp_path / "config.yaml.notes.bak"  # not a copy the panel made: left alone
    other.write_text("mine", encoding="utf-8")
    save_settings(path, {"memory.recall_top_k": 7}, now=datetime(2026, 12, 3))
    assert other.exists() and len(list(tmp_path.glob("config.yaml.2026-*.bak"))) == 5


def field(page, key: str):
    return page.locator(f'.field[data-key="{key}"]')


def save_and_wait(page, outcome: str):
    page.click("#save")
    page.wait_for_selector(f"#message.{outcome}", timeout=10_000)
    return page.locator("#message").inner_text()


@pytest.mark.slow
def test_the_page_saves_recall_top_k_with_the_comments_kept(panel):
    from playwright.sync_api import expect

    from panel_helpers import chromium_page, screenshot

    path, url, token = panel
    before = path.read_text(encoding="utf-8")
    with chromium_page() as page:
        page.goto(f"{url}/settings?token={token}")
        row = page.locator('tr[data-key="memory.recall_top_k"]')
        assert "results when recall is called without k" in row.inner_text()
        assert "applies live" in row.inner_text()
        assert row.locator(".default").inner_text() == "5" and row.locator(".now").inner_text() == "5"
        assert field(page, "memory.recall_top_k").locator("input").get_attribute("min") == "1"
        assert "needs a restart" in page.locator('tr[data-key="storage.data_dir"]').inner_text()
        assert page.locator("table.settings tr.setting").count() == sum(
            len(s) for s in example_settings().values())
        assert page.locator("#save").is_disabled()
        opacity = 'Number(getComputedStyle(document.getElementById("save")).opacity)'
        assert page.evaluate(opacity) < 0.6  # a disabled Save looks disabled
        # The panel runs no front: server.transport says what runs (nothing here) and the file's value.
        assert page.locator("#transport-now").inner_text() == "no front running"
        assert "in the config file: stdio" in page.locator('tr[data-key="server.transport"]').inner_text()

        field(page, "memory.recall_top_k").locator("input").fill("3")
        assert page.evaluate(opacity) == 1
        assert page.locator("#changed-count").inner_text() == "1 changed"
        shown = save_and_wait(page, "ok")
        assert "Saved 1 setting(s)" in shown and "Applies live: memory.recall_top_k." in shown
        after = path.read_text(encoding="utf-8")
        assert yaml.safe_load(after)["memory"]["recall_top_k"] == 3
        assert comments(after) == comments(before) and key_order(after) == key_order(before)
        backups = list(path.parent.glob("config.yaml.*.bak"))
        assert len(backups) == 1 and backups[0].read_text(encoding="utf-8") == before
        # The panel's own running config follows the file (its config watcher), and so the page.
        expect(page.locator('[data-now="memory.recall_top_k"]')).to_have_text("3", timeout=10_000)
        page.fill("#filter", "recall")  # the whole page is some 100 rows: show a part of it
        page.evaluate("window.scrollTo(0, 0)")
        screenshot(page, "settings")


@pytest.mark.slow
def test_the_page_shows_the_loaders_refusal_and_writes_nothing(panel):
    from panel_helpers import chromium_page

    path, url, token = panel
    before = path.read_bytes()
    with chromium_page() as page:
        page.goto(f"{url}/settings?token={token}")
        top_k = field(page, "memory.recall_top_k").locator("input")
        top_k.fill("0")
        shown = save_and_wait(page, "error")
        assert "memory.recall_top_k must be >= 1, got 0" in shown
        assert page.locator('tr[data-key="memory.recall_top_k"].invalid').count() == 1
        # The reason is on the refused row too, not only at the top of a long page.
        beside = page.locator('tr[data-key="memory.recall_top_k"] .row-error')
        assert "memory.recall_top_k must be >= 1, got 0" in beside.inner_text()
        assert page.locator(".row-error").count() == 1
        assert path.read_bytes() == before
        top_k.fill("20")
        shown = save_and_wait(page, "error")
        assert "memory.recall_top_k (20) must not exceed memory.recall_max_k (15)" in shown
        assert path.read_bytes() == before
        assert list(path.parent.glob("config.yaml.*")) == []


@pytest.mark.slow
def test_the_page_saves_lists_as_yaml_lists(panel):
    from panel_helpers import chromium_page

    path, url, token = panel
    with chromium_page() as page:
        page.goto(f"{url}/settings?token={token}")
        cues = field(page, "retrieval.temporal_cues").locator("textarea")
        assert cues.input_value().splitlines()[:3] == ["when", "last time", "yesterday"]
        cues.fill("when\n  last time \n\n上次\nno")
        field(page, "server.exposed_tools").locator('input[value="edit_memory"]').uncheck()
        field(page, "retrieval.mmr_enabled").locator("input").check()
        shown = save_and_wait(page, "ok")
        assert "Saved 3 setting(s)" in shown
    saved = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert saved["retrieval"]["temporal_cues"] == ["when", "last time", "上次", "no"]
    assert saved["server"]["exposed_tools"] == ["memorize", "recall", "list_memories"]
    assert saved["retrieval"]["mmr_enabled"] is True
    assert '  temporal_cues: [when, last time, 上次, "no"]\n' in path.read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_setting_saved_in_the_browser_reaches_a_running_front_without_a_restart(panel):
    """The whole path: the settings page writes config.yaml, the running front's watcher takes
    it up, and its next recall without k returns the new number of results."""
    from helpers import mcp_session, stdio_params, wait_for
    from panel_helpers import chromium_page

    path, url, token = panel
    with mcp_session(stdio_params(path)) as front:
        for i in range(8):
            front.ok("memorize", {"content": f"note {i} about the garden and its roses"})
        assert len(front.ok("recall", {"query": "garden roses", "min_score": 0})["results"]) == 5
        with chromium_page() as page:
            page.goto(f"{url}/settings?token={token}")
            # What runs, from the fronts' heartbeats: this stdio front, by its pid.
            assert "stdio (front pid " in page.locator("#transport-now").inner_text()
            field(page, "memory.recall_top_k").locator("input").fill("3")
            save_and_wait(page, "ok")
        wait_for(lambda: len(front.ok("recall", {"query": "garden roses", "min_score": 0})["results"]) == 3,
                 60, 0.05, "the running front to take the saved recall_top_k")


# -- request bodies, over real HTTP --------------------------------------------------------

def post_settings(url: str, token: str, body, chunked: bool = False) -> tuple[int, dict]:
    """POST /api/settings as the page does (token, CSRF token, this panel's Origin); `body`
    bytes, or an iterable of chunks sent without a Content-Length."""
    import http.client
    import json
    from urllib.parse import urlsplit

    from aokun_panel.security import csrf_token

    where = urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=120)
    try:
        connection.request("POST", "/api/settings", body=body, encode_chunked=chunked, headers={
            "X-Aokun-Token": token, "X-CSRF-Token": csrf_token(token), "Origin": url,
            "Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_a_body_over_the_bound_is_refused_in_one_line_and_the_largest_list_fits(panel):
    import json

    from aokun_panel.security import MAX_BODY_BYTES
    from shared.config import MAX_LIST_CHARS

    path, url, token = panel
    before = path.read_text(encoding="utf-8")
    huge = json.dumps({"server.host": "h" * 10_000_000}).encode()
    status, answer = post_settings(url, token, huge)
    assert status == 413 and answer == {
        "error": "request body too large (10.0 MB): the panel takes at most 1.0 MB"}
    # Without a Content-Length (chunked), the bound holds the same way.
    status, answer = post_settings(url, token, (huge[i:i + 65536] for i in range(0, len(huge), 65536)),
                                   chunked=True)
    assert status == 413 and answer == {"error": "request body too large: the panel takes at most 1.0 MB"}
    assert path.read_text(encoding="utf-8") == before
    # The largest legitimate save: a cue list at its limit, in three-byte characters, and a
    # second one beside it.
    entries = ["湖畔灯台守" * 199] * (MAX_LIST_CHARS // 995)
    body = json.dumps({"retrieval.temporal_cues": entries, "retrieval.plan_cues": entries},
                      ensure_ascii=False).encode()
    assert 2 * 290_000 < len(body) <= MAX_BODY_BYTES
    status, answer = post_settings(url, token, body)
    assert status == 200, answer
    saved = yaml.safe_load(path.read_text(encoding="utf-8"))["retrieval"]
    assert saved["temporal_cues"] == entries and saved["plan_cues"] == entries
