"""The panel's Memories and Atoms pages in a real browser, against a real panel process, on a
store whose atoms, graph and vectors the worker's stages built, run in this process by the
worker's own runner (embeddings from a fake API server).

One store for the module (seeding and the stages take a while); each test works on memories
no other test touches, so the order does not matter. No worker runs while the panel does: an
edit's stages then stay pending for the test to see.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from aokun_panel.security import csrf_token
from fake_openai import FakeEmbeddingsServer
from helpers import all_processed, db_rows, memory_service, run_every_stage, wait_for, write_config
from panel_helpers import chromium_page, panel_process, screenshot
from shared.config import load_config
from shared.queue import open_queue
from shared.store import open_store
from shared.store.model.documents import MemoryFields
from shared.tasks import Enqueuer

pytestmark = pytest.mark.slow

SEEDS = {
    "cat": ("Alice adopted a grey cat named Mochi", "alice"),
    "nurse": ("Alice works as a nurse in Lisbon", "alice"),
    "dentist": ("Alice 明天下午三点去看牙医", "alice"),
    "cello": ("Bob plays the cello in a small orchestra", "bob"),
    "typewriters": ("Carol collects vintage typewriters from Berlin flea markets", "carol"),
    "sourdough": ("Dave is learning to bake sourdough bread", "dave"),
    "beijing": ("我住在北京", "u2"),
}


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    """(url, token, config, ids): a processed store, no worker, and a panel on it."""
    folder = tmp_path_factory.mktemp("panel-memories")
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(folder, embedding={"provider": "openai", "base_url": api.base_url,
                                                 "model": "fake", "dimensions": 32},
                              queue={"retry_base_s": 0.2})
        storage = load_config(config).storage
        store = open_store(storage)
        memories = memory_service(store, queue=Enqueuer(open_queue(storage)))
        ids = {name: memories.memorize(text, MemoryFields(persona_id=persona)).id
               for name, (text, persona) in SEEDS.items()}
        memories.set_pinned(ids["nurse"], True)
        try:
            settle(config, len(ids))
            # Superseding needs the old atom stored first: the new memory comes once it is.
            ids["shanghai"] = memories.memorize("我现在住在上海", MemoryFields(persona_id="u2")).id
            settle(config, len(ids))
        finally:
            store.close()
        with panel_process(config) as (url, token):
            yield url, token, config, ids


def settle(config, count: int) -> None:
    """What a worker does with the memories waiting, done here: then `count` are processed."""
    run_every_stage(config)
    assert all_processed(config, count)


def search(page, url: str, query: str, persona: str = "") -> list[int]:
    """Search from the Memories page's form; the ids of the hits, best first."""
    page.goto(f"{url}/memories")
    page.fill("input[name=q]", query)
    page.fill("input[name=persona]", persona)
    page.click("button[type=submit]")
    page.wait_for_selector("#hits")
    return [int(i) for i in page.locator("#hits .hit").evaluate_all("els => els.map(e => e.dataset.id)")]


def listed(page, url: str, **filters) -> list[int]:
    query = "&".join(f"{k}={v}" for k, v in filters.items())
    page.goto(f"{url}/memories?{query}")
    return [int(i) for i in page.locator("#memories tr.memory").evaluate_all("els => els.map(e => e.dataset.id)")]


def bar_width(locator) -> float:
    """A score bar's filled share, in percent of its track."""
    return float(locator.locator("span").get_attribute("style").split(":")[1].strip(" %;"))


def test_search_finds_a_seeded_memory_with_channel_bars(panel):
    url, token, _, ids = panel
    with chromium_page() as page:
        page.goto(f"{url}/?token={token}")
        if not httpx.get(f"{url}/api/search/ready", cookies={"aokun_panel": token}).json()["ready"]:
            # Before the first search the page says, on submit, that the model is loading. The
            # submission itself is held back here (a listener after the page's own), so the
            # message is seen however fast the machine answers.
            page.goto(f"{url}/memories")
            page.evaluate("document.getElementById('filters').addEventListener('submit', e => e.preventDefault())")
            page.fill("input[name=q]", "grey cat")
            page.click("button[type=submit]")
            assert page.locator("#searching").is_visible()
            assert "loads the embedding model" in page.locator("#searching").inner_text()
        assert search(page, url, "grey cat Mochi")[0] == ids["cat"]
        assert httpx.get(f"{url}/api/search/ready", cookies={"aokun_panel": token}).json() == {"ready": True}
        assert page.locator("#intents").count() == 0  # no cue in the query, no intent to show
        # A query's intent ("what is" is a factual cue) once above the results, not on each hit.
        assert len(search(page, url, "what is the grey cat called")) > 1
        assert page.locator("#intents").inner_text() == "The query's intent: factual"
        assert "intent" not in page.locator("#hits").inner_text()
        hit = page.locator(f"#hits .hit[data-id='{ids['cat']}']")
        assert bar_width(hit.locator(".channel-bar[data-channel=bm25]")) > 0
        assert bar_width(hit.locator(".channel-bar[data-channel=vector]")) > 0
        assert bar_width(hit.locator(".route-bar[data-route=document]")) > 0
        assert "#1" in hit.locator(".scores").inner_text()
        assert "Mochi" in hit.locator(".hit-text").inner_text()
        screenshot(page, "memories")
        # Within another persona the same words find none of Alice's memories.
        assert ids["cat"] not in search(page, url, "grey cat Mochi", persona="bob")


def test_list_filters_by_persona_and_state(panel):
    url, token, _, ids = panel
    with chromium_page() as page:
        page.goto(f"{url}/?token={token}")
        assert set(listed(page, url, persona="alice")) == {ids["cat"], ids["nurse"], ids["dentist"]}
        assert listed(page, url, persona="bob") == [ids["cello"]]
        assert listed(page, url, state="pinned") == [ids["nurse"]]
        assert listed(page, url, state="archived") == []
        assert listed(page, url, persona="alice", until="2000-01-01") == []
        # Newest first, across personas.
        everyone = listed(page, url, state="all")
        assert everyone == sorted(everyone, reverse=True) and ids["cello"] in everyone
        page.goto(f"{url}/memories?page={'9' * 30}")  # far past the end: empty, not an error
        assert page.locator("#memories tr.memory").count() == 0
        page.goto(f"{url}/memories?since=yesterday")
        assert "since must be an ISO-8601 date" in page.locator("#problem").inner_text()


def test_a_memory_shows_its_atoms_graph_facts_and_stages(panel):
    url, token, _, ids = panel
    with chromium_page() as page:
        page.goto(f"{url}/memories/{ids['shanghai']}?token={token}")
        assert "我现在住在上海" in page.locator("#text").inner_text()
        assert page.locator("#stages tr.stage").evaluate_all(
            "els => els.map(e => [e.dataset.stage, e.dataset.status])") == [
            ["embed", "done"], ["atoms", "done"], ["graph", "done"]]
        atom = page.locator("#atoms tr.atom").first
        assert atom.get_attribute("data-state") == "active"
        assert atom.get_attribute("data-type") == "factual"
        chain = atom.locator(".chain").inner_text()
        assert chain.index("我住在北京") < chain.index("我现在住在上海")
        assert "fact:" in page.locator("#graph-nodes").inner_text()
        assert "Fact: 我现在住在上海" in page.locator("#graph-entries").inner_text()
        screenshot(page, "memory")
        page.goto(f"{url}/memories/{ids['beijing']}")
        assert page.locator("#atoms tr.atom").first.get_attribute("data-state") == "superseded"
        for missing in (999999, 2**64):
            page.goto(f"{url}/memories/{missing}")
            assert f"no memory with id {missing}" in page.locator("#missing").inner_text()


def test_edit_from_the_browser_reindexes_and_requeues(panel):
    url, token, config, ids = panel
    memory_id = ids["sourdough"]
    hash_before = db_rows(config, "SELECT content_hash FROM documents WHERE id = ?", (memory_id,))[0][0]
    with chromium_page() as page:
        page.goto(f"{url}/memories/{memory_id}?token={token}")
        # A bad value is refused with the edit_memory tool's message, and nothing is written.
        page.fill("#e-importance", "2")
        page.click("#save")
        wait_for(lambda: page.locator("#edit-message").inner_text(), 10, what="the refusal")
        assert page.locator("#edit-message").inner_text() == "metadata.importance: must be at most 1 (got 2)"
        assert db_rows(config, "SELECT importance, content_hash FROM documents WHERE id = ?",
                       (memory_id,)) == [(0.5, hash_before)]

        page.fill("#e-importance", "0.9")
        page.fill("#e-content", "Dave bakes rye bread every Sunday now")
        page.click("#save")
        page.wait_for_selector("#saved")
        assert "Dave bakes rye bread every Sunday now" in page.locator("#text").inner_text()
        statuses = page.locator("#stages tr.stage").evaluate_all("els => els.map(e => e.dataset.status)")
        assert set(statuses) == {"pending"}
        page.click("#pin")
        page.wait_for_selector("#pinned-tag")
    text, importance, pinned, new_hash = db_rows(
        config, "SELECT text, importance, pinned, content_hash FROM documents WHERE id = ?", (memory_id,))[0]
    assert re.fullmatch(r"\[[-\d :]+\] Dave bakes rye bread every Sunday now", text)
    assert (importance, pinned) == (0.9, 1) and new_hash != hash_before
    # Exactly as edit_memory: every stage pending again, for the new version; old vector gone.
    assert db_rows(config, "SELECT stage, status, attempts, content_hash FROM memory_stages WHERE memory_id = ?"
                           " ORDER BY stage", (memory_id,)) == [
        ("atoms", "pending", 0, new_hash), ("embed", "pending", 0, new_hash), ("graph", "pending", 0, new_hash)]
    assert db_rows(config, "SELECT COUNT(*) FROM vectors WHERE kind = 'document' AND memory_id = ?",
                   (memory_id,)) == [(0,)]


def test_delete_from_the_browser_shows_the_receipt(panel):
    url, token, config, ids = panel
    memory_id = ids["typewriters"]
    backup = subprocess.run([str(Path(sys.executable).parent / "aokun"), "backup", "--config", str(config)],
                            capture_output=True, text=True, timeout=120)
    assert backup.returncode == 0, backup.stderr
    backup_name = Path(backup.stdout.strip().splitlines()[-1]).name
    with chromium_page() as page:
        page.goto(f"{url}/?token={token}")
        assert search(page, url, "vintage typewriters Berlin")[0] == memory_id
        page.goto(f"{url}/memories/{memory_id}")
        page.on("dialog", lambda dialog: dialog.accept())
        page.click("#delete")
        page.wait_for_selector("#receipt:not([hidden])")
        receipt = dict(page.locator("#receipt-rows tr").evaluate_all(
            "els => els.map(e => [e.dataset.table, Number(e.cells[1].textContent)])"))
        assert receipt["documents"] == 1 and receipt["memory_stages"] == 3
        assert receipt["vectors"] >= 1 and receipt["memory_atoms"] >= 1
        # The backup written before the delete still holds the memory, and the page says which.
        assert backup_name in page.locator("#receipt-backups:not([hidden])").inner_text()
        assert memory_id not in search(page, url, "vintage typewriters Berlin")
        assert memory_id not in listed(page, url, state="all")
        assert listed(page, url, persona="carol") == []
    assert db_rows(config, "SELECT COUNT(*) FROM documents WHERE id = ?", (memory_id,)) == [(0,)]
    assert db_rows(config, "SELECT COUNT(*) FROM memory_atoms WHERE memory_id = ?", (memory_id,)) == [(0,)]
    again = httpx.delete(f"{url}/api/memories/{memory_id}", cookies={"aokun_panel": token},
                         headers={"Origin": url, "X-CSRF-Token": csrf_token(token)})
    assert again.status_code == 404 and again.json() == {"error": f"no memory with id {memory_id}"}


def test_atoms_page_shows_a_superseded_chain_and_shelf_lives(panel):
    url, token, config, ids = panel
    old_atom, = db_rows(config, "SELECT id FROM memory_atoms WHERE memory_id = ?", (ids["beijing"],))[0]
    new_atom, = db_rows(config, "SELECT id FROM memory_atoms WHERE memory_id = ?", (ids["shanghai"],))[0]
    plan, = db_rows(config, "SELECT id FROM memory_atoms WHERE memory_id = ? AND type = 'planned'",
                    (ids["dentist"],))[0]
    with chromium_page() as page:
        page.goto(f"{url}/atoms?token={token}")
        old = page.locator(f"#atom-{old_atom}")
        assert old.get_attribute("data-state") == "superseded"
        links = old.locator(".chain a")
        assert links.evaluate_all("els => els.map(e => e.getAttribute('href'))") == [
            f"/memories/{ids['beijing']}", f"/memories/{ids['shanghai']}"]
        assert "我现在住在上海" in links.nth(1).inner_text()
        # An active factual atom: most of its 180-day-based shelf life left.
        fresh = page.locator(f"#atom-{new_atom}")
        assert bar_width(fresh.locator(".life .bar")) > 90
        assert "days left" in fresh.locator(".life").inner_text()
        # A plan counts down to its deadline (tomorrow 15:00).
        due = page.locator(f"#atom-{plan}")
        assert "deadline" in due.inner_text() and 0 < bar_width(due.locator(".life .bar")) <= 100
        assert page.locator(f"#atom-{plan} .reinforced").inner_text() == "0"
        counts = page.locator("#atom-counts td[data-type=factual][data-state=superseded]")
        wait_for(lambda: counts.inner_text() == "1", 10, what="the counts, fetched after the page")
        assert counts.locator("a").get_attribute("href") == "/atoms?type=factual&state=superseded"
        screenshot(page, "atoms")
        page.goto(f"{url}/atoms?state=superseded&persona=u2")
        assert page.locator("#atoms tr.atom").evaluate_all("els => els.map(e => e.id)") == [f"atom-{old_atom}"]
        page.goto(f"{url}/atoms?page={'9' * 30}")
        assert page.locator("#atoms tr.atom").count() == 0 and "No atoms match" in page.locator("#atoms").inner_text()
        page.goto(f"{url}/atoms?type=planned")
        assert set(page.locator("#atoms tr.atom").evaluate_all("els => els.map(e => e.id)")) == {f"atom-{plan}"}
