"""The panel's queue page in a real browser: a stage that really failed, retried from the page
(the `aokun repair --apply` path), then done by a real worker, and what that means for the time
until every memory is searchable by meaning; missing outputs found and redone."""

from __future__ import annotations

import sqlite3

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import all_processed, db_rows, seed_memories, start_worker, stop, wait_for, write_config
from panel_helpers import chromium_page, panel_process, screenshot

ALL_SEARCHABLE = "every memory is searchable by words; none waits to be searchable by meaning"

pytestmark = pytest.mark.slow

# Vectors of the memory about the cat cannot be stored: its embed and graph stages fail for real.
REFUSE_VECTORS = ("CREATE TRIGGER refuse_vectors BEFORE INSERT ON vectors WHEN NEW.memory_id = {id}"
                  " BEGIN SELECT RAISE(ABORT, 'the disk says no'); END")


@pytest.fixture
def fake_api():
    with FakeEmbeddingsServer(dim=16) as server:
        yield server


def make_config(tmp_path, fake_api):
    return write_config(
        tmp_path,
        embedding={"provider": "openai", "base_url": fake_api.base_url, "model": "fake-embed",
                   "dimensions": 16, "api_key": "sk-test", "max_retries": 0},
        queue={"max_retries": 1, "retry_base_s": 0.2, "retry_max_s": 1.0, "reconcile_interval_s": 2.0},
        worker={"heartbeat_interval_s": 0.5})


def seed(config, *texts) -> list[int]:
    return seed_memories(config, "alice", *texts)


def sql(config, statement: str) -> None:
    conn = sqlite3.connect(config.parent / "data" / "aokun.db", timeout=30)
    try:
        conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def stage_rows(config, memory_id: int) -> dict[str, tuple]:
    return {stage: (status, attempts) for stage, status, attempts in db_rows(
        config, "SELECT stage, status, attempts FROM memory_stages WHERE memory_id = ?", (memory_id,))}


def test_a_failed_stage_is_shown_with_its_error_and_retried_until_done(tmp_path, fake_api):
    config = make_config(tmp_path, fake_api)
    cat, nurse = seed(config, "Alice adopted a grey cat named Mochi", "Alice works as a nurse in Lisbon")
    sql(config, REFUSE_VECTORS.format(id=cat))
    worker = start_worker(config)
    try:
        # The graph stage reads the memory's vectors: it fails with the embed stage, not on its own.
        wait_for(lambda: stage_rows(config, cat) == {"embed": ("failed", 1), "atoms": ("done", 1),
                                                     "graph": ("failed", 0)}
                 and all(s == "done" for s, _ in stage_rows(config, nurse).values()),
                 60, what="the cat's embed and graph stages failed for good, the rest done")
        with panel_process(config) as (url, token), chromium_page() as page:
            page.goto(f"{url}/queue?token={token}")
            assert page.locator("#queue-failed").inner_text() == "2"
            rows = page.locator("#problems tbody tr")
            assert rows.count() == 2
            embed = rows.filter(has_text="embed")
            assert embed.locator("td").nth(0).inner_text() == f"#{cat}"
            assert embed.locator("td").nth(2).inner_text() == "failed"
            assert embed.locator("td").nth(3).inner_text() == "1"
            assert "the disk says no" in embed.locator("td").nth(4).inner_text()
            assert "failed for good" in page.locator("#warnings").inner_text()
            workers = page.locator("#workers tbody tr")
            assert workers.count() == 1 and workers.first.locator("td").first.inner_text() == str(worker.pid)
            assert "by hand" in workers.first.inner_text()
            # A memory whose embed stage failed for good waits for nothing: only a retry helps.
            assert page.locator("#catch-up").inner_text() == ALL_SEARCHABLE
            assert catch_up_row(page, "embed") == ["embed", "0", "", "none waits"]
            screenshot(page, "queue")

            # No worker now: the retried stages wait, pending with fresh attempts.
            assert stop(worker) == 0
            page.wait_for_function("document.querySelector('#workers tbody').innerText.includes('no worker alive')")
            sql(config, "DROP TRIGGER refuse_vectors")
            page.click("#retry-failed")
            page.wait_for_selector("#retry-result:has-text('2 failed stages set to retry')")
            assert stage_rows(config, cat) == {"embed": ("pending", 0), "atoms": ("done", 1),
                                               "graph": ("pending", 0)}
            assert db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE last_error IS NOT NULL"
                                   " AND status = 'failed'") == [(0,)]
            page.wait_for_function("document.querySelector('#queue-failed').innerText === '0'")
            assert page.locator("#problems tbody").inner_text().strip() == "no failed or stuck stage"
            assert page.locator("#catch-up").inner_text() == (
                "searchable by words: all; by meaning: 1 memory waits and no worker is running "
                "(start one: aokun run, or aokun-worker)")
            # (The pace column: the other memory's stages, done minutes ago at most.)
            assert [catch_up_row(page, stage)[::3] for stage in ("embed", "graph")] == [
                ["embed", "no worker running"], ["graph", "no worker running"]]
            assert [catch_up_row(page, stage)[1] for stage in ("embed", "atoms", "graph")] == ["1", "0", "1"]

            # A worker takes them from the queue the panel filled.
            worker = start_worker(config)
            wait_for(lambda: all_processed(config, 2), 60, what="the retried stages done")
            page.wait_for_function("document.querySelector('#queue-done').innerText === '6'", timeout=15_000)
            assert page.locator("#workers tbody tr").first.locator("td").first.inner_text() == str(worker.pid)
            page.wait_for_function(f"document.querySelector('#catch-up').innerText === {ALL_SEARCHABLE!r}",
                                   timeout=15_000)

            # The same in Chinese.
            page.evaluate("document.cookie = 'aokun_lang=zh; Path=/'")
            page.reload()
            assert page.locator("#catch-up").inner_text() == "所有记忆都可按字词搜索；没有记忆在等待按语义搜索"
            assert catch_up_row(page, "embed")[1:] == ["0", "", "无等待"]
    finally:
        stop(worker)


def catch_up_row(page, stage: str) -> list[str]:
    """The cells of a stage's row in the table of what waits to be searchable."""
    index = ["embed", "atoms", "graph"].index(stage)
    cells = page.locator("#catch-up-stages tbody tr").nth(index).locator("td")
    return [cell.strip() for cell in cells.all_inner_texts()]


def test_missing_outputs_are_found_and_their_stages_redone(tmp_path, fake_api):
    config = make_config(tmp_path, fake_api)
    ids = seed(config, "Alice hates coriander", "Alice runs on Sundays")
    # The embed stage says done, yet no vector was stored: what `aokun doctor` calls missing.
    sql(config, "UPDATE memory_stages SET status = 'done', attempts = 1 WHERE stage = 'embed'")
    with panel_process(config) as (url, token), chromium_page() as page:
        page.goto(f"{url}/queue?token={token}")
        assert page.locator("#redo-missing").is_hidden()
        page.click("#check-missing")
        page.wait_for_selector("#missing li")
        listed = page.locator("#missing").inner_text()
        assert f"missing vectors: 2 memories (e.g. {ids[0]}, {ids[1]})" in listed
        page.click("#redo-missing")
        page.wait_for_selector("#missing li.ok:has-text('2 stages set to run again')")
        assert {stage_rows(config, i)["embed"] for i in ids} == {("pending", 0)}
        page.click("#check-missing")
        page.wait_for_selector("#missing li.ok:has-text('nothing missing')")
