"""The panel in both languages, in a real browser against a real panel process: every page in
English and in Chinese (by the browser's language and by the switch), no console error on any,
the choice remembered; every time in one zone the user sees and can change; and the page a
browser gets without the token."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from aokun_panel.i18n import catalogue
from helpers import memory_service, write_config
from panel_helpers import chromium_page, collect_problems, panel_process, screenshot
from shared.config import load_config
from shared.store import open_store
from shared.store.model.documents import MemoryFields

pytestmark = pytest.mark.slow

BEIJING = timezone(timedelta(hours=8))
NEW_YORK = timezone(timedelta(hours=-5))
PAGES = ("/", "/settings", "/memories", "/memories/{id}", "/atoms", "/graph", "/queue", "/forgetting")
NAV = ("overview", "settings", "memories", "atoms", "graph", "queue", "forgetting")
HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    """(url, token, ids): memories said on two clocks at one instant, and a panel on them."""
    folder = tmp_path_factory.mktemp("panel-languages")
    config = write_config(folder)
    store = open_store(load_config(config).storage)
    memories = memory_service(store)
    ids = {
        "beijing": memories.memorize("我明天下午三点去看牙医", MemoryFields(
            persona_id="u1", original_time=datetime(2024, 5, 8, 21, 56, tzinfo=BEIJING))).id,
        "new_york": memories.memorize("Alice adopted a grey cat named Mochi", MemoryFields(
            persona_id="u1", original_time=datetime(2024, 5, 8, 8, 56, tzinfo=NEW_YORK))).id,
    }
    memories.set_pinned(ids["beijing"], True)
    store.close()
    with panel_process(config) as (url, token):
        yield url, token, ids


def settle(page) -> None:
    """The page loaded and its scripts done (the graph laid out, the charts drawn)."""
    page.wait_for_load_state("networkidle")
    if page.locator("#graph").count():
        page.wait_for_selector("#graph[data-state=ready], #graph[data-state=failed]")


def shows_language(page, lang: str, title_key: str) -> None:
    words = catalogue(lang)
    assert page.locator("html").get_attribute("lang") == ("zh-CN" if lang == "zh" else "en")
    assert page.locator("h1").inner_text() == words[title_key]
    assert page.locator("header nav a").all_inner_texts() == [words[f"nav.{n}"] for n in NAV]
    text = page.locator("main").inner_text()
    if lang == "zh":
        assert len(HAN.findall(text)) > 10, text[:300]
    else:
        assert "Overview" in page.locator("header").inner_text() and not HAN.search(page.locator("h1").inner_text())


@pytest.mark.parametrize("locale, lang", [("en-US", "en"), ("zh-CN", "zh")])
def test_every_page_in_the_browsers_language_without_a_console_error(panel, locale, lang):
    url, token, ids = panel
    with chromium_page(locale=locale) as page:
        problems = collect_problems(page)
        page.goto(f"{url}/?token={token}")
        for path in PAGES:
            page.goto(url + path.format(id=ids["beijing"]))
            settle(page)
            title = "nav.memories" if path.startswith("/memories") else f"nav.{path.strip('/') or 'overview'}"
            shows_language(page, lang, title)
            if path == "/settings":  # the descriptions, from config.example.yaml or translated
                about = page.locator('tr[data-key="memory.recall_top_k"] .about').inner_text()
                assert about == ("调用 recall 时未指定 k 返回的结果数" if lang == "zh"
                                 else "results when recall is called without k")
                page.fill("#filter", "recall")  # some 100 rows: the screenshot shows a part
            if lang == "zh" and path in ("/", "/memories", "/settings"):
                screenshot(page, f"{ {'/': 'overview'}.get(path, path.strip('/')) }-zh")
        assert problems == []


def test_the_switch_changes_the_language_and_it_is_remembered(panel):
    url, token, _ = panel
    with chromium_page(locale="en-US") as page:
        problems = collect_problems(page)
        page.goto(f"{url}/queue?token={token}")
        shows_language(page, "en", "nav.queue")
        with page.expect_navigation():
            page.select_option("#lang-switch", "zh")
        shows_language(page, "zh", "nav.queue")
        assert "没有失败或卡住的阶段" in page.locator("#problems").inner_text()  # the script's texts too
        page.goto(f"{url}/atoms")  # the cookie outweighs the browser's English
        shows_language(page, "zh", "nav.atoms")
        with page.expect_navigation():
            page.select_option("#lang-switch", "en")
        shows_language(page, "en", "nav.atoms")
        assert problems == []


def happened(page) -> dict[int, str]:
    cells = page.locator("#memories tr.memory").evaluate_all(
        "rows => rows.map(r => [Number(r.dataset.id), r.querySelector('td.happened').innerText.trim()])")
    return dict(cells)


def test_every_time_is_shown_in_one_named_zone_the_user_can_change(panel):
    url, token, ids = panel
    with chromium_page(timezone_id="Asia/Shanghai") as page:
        problems = collect_problems(page)
        # The first page, before the browser has said its zone: UTC, and it says so.
        page.goto(f"{url}/memories?token={token}")
        assert "(UTC)" in page.locator("#happened-head").inner_text()
        assert happened(page) == {ids["beijing"]: "2024-05-08 13:56", ids["new_york"]: "2024-05-08 13:56"}
        # The text leaves out its stored time marker ("[2024-05-08 21:56] ..."), on its own clock.
        assert not any(t.startswith("[") for t in page.locator("#memories td.text").all_inner_texts())
        # From the next page on, the browser's zone: one clock for both memories.
        page.reload()
        assert "(Asia/Shanghai)" in page.locator("#happened-head").inner_text()
        assert happened(page) == {ids["beijing"]: "2024-05-08 21:56", ids["new_york"]: "2024-05-08 21:56"}
        choices = page.locator("#zone-switch option").evaluate_all("os => os.map(o => o.value)")
        assert {"UTC", "Asia/Shanghai", "+08:00", "-05:00"} <= set(choices)
        # A zone seen in the data, chosen and remembered on the other pages.
        with page.expect_navigation():
            page.select_option("#zone-switch", "-05:00")
        assert happened(page) == {ids["beijing"]: "2024-05-08 08:56", ids["new_york"]: "2024-05-08 08:56"}
        page.goto(f"{url}/memories/{ids['beijing']}")
        assert "-05:00" in page.locator("h2", has_text="Metadata").inner_text()
        assert page.locator("#happened").inner_text().startswith("2024-05-08 08:56")
        assert "2024-05-08T21:56:00+08:00" in page.locator("#happened").inner_text()  # as it was given
        assert page.locator("#zone-switch").input_value() == "-05:00"
        assert problems == []


@pytest.mark.parametrize("language, lang", [("zh-CN,zh;q=0.9", "zh"), ("en-GB", "en")])
def test_a_browser_without_the_token_is_told_how_to_get_the_url(panel, language, lang):
    url, _, _ = panel
    page = httpx.get(f"{url}/memories", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8",
                                                 "Accept-Language": language})
    assert page.status_code == 401 and page.headers["content-type"].startswith("text/html")
    assert catalogue(lang)["locked.title"] in page.text and "aokun panel" in page.text and "aokun run" in page.text
    assert f'<html lang="{"zh-CN" if lang == "zh" else "en"}"' in page.text
    # Scripts and the pages' own requests keep the JSON answer.
    for headers in ({}, {"Accept": "application/json"}):
        answer = httpx.get(f"{url}/", headers=headers)
        assert answer.status_code == 401 and "aokun panel" in answer.json()["error"]
    api = httpx.get(f"{url}/api/overview", headers={"Accept": "text/html"})
    assert api.status_code == 401 and "error" in api.json()


def test_the_favicon_is_served(panel):
    url, token, _ = panel
    icon = httpx.get(f"{url}/static/favicon.svg", cookies={"aokun_panel": token})
    assert icon.status_code == 200 and icon.text.startswith("<svg")
