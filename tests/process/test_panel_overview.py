"""The panel's overview and its gate, in a real browser against a real panel process."""

from __future__ import annotations

import httpx
import pytest

from helpers import memory_service, store_sql, write_config
from panel_helpers import chromium_page, panel_process, screenshot
from shared.config import load_config
from shared.store import open_store
from shared.store.model.documents import MemoryFields

pytestmark = pytest.mark.slow


@pytest.fixture
def seeded(tmp_path):
    """A store with 3 memories (one pinned, one archived) and a panel on it."""
    config = write_config(tmp_path)
    store = open_store(load_config(config).storage)
    memories = memory_service(store)
    ids = [memories.memorize(text, MemoryFields(persona_id="alice")).id for text in (
        "Alice adopted a grey cat named Mochi", "Alice works as a nurse in Lisbon", "Alice hates coriander")]
    memories.set_pinned(ids[0], True)
    # Archived by hand: the interface archives only by age and importance (the lifecycle's rule).
    store_sql(store, "UPDATE documents SET archived = 1 WHERE id = ?", (ids[2],))
    store.close()
    with panel_process(config) as (url, token):
        yield url, token


def test_overview_shows_the_seeded_counts(seeded):
    url, token = seeded
    with chromium_page() as page:
        page.goto(f"{url}/?token={token}")
        assert page.locator("#docs-active").inner_text() == "2"
        assert page.locator("#docs-pinned").inner_text() == "1"
        assert page.locator("#docs-archived").inner_text() == "1"
        assert page.locator("#queue-pending").inner_text() == "9"
        assert "no worker has ever run" in page.locator("#warnings").inner_text()
        # The cookie set by the first visit carries the token from now on.
        page.goto(f"{url}/")
        assert page.locator("#docs-active").inner_text() == "2"
        screenshot(page, "overview")


def test_the_gate_refuses_what_it_must(seeded):
    url, token = seeded
    assert httpx.get(f"{url}/").status_code == 401
    assert httpx.get(f"{url}/?token=wrong").status_code == 401
    assert httpx.get(f"{url}/?token={token}").status_code == 200
    foreign = httpx.get(f"{url}/?token={token}", headers={"Host": "attacker.example:8765"})
    assert foreign.status_code == 403 and "Host" in foreign.json()["error"]
    cookie = {"aokun_panel": token}
    cross = httpx.post(f"{url}/api/overview", cookies=cookie, headers={"Origin": "http://attacker.example"})
    assert cross.status_code == 403 and "cross-origin" in cross.json()["error"]
    no_csrf = httpx.post(f"{url}/api/overview", cookies=cookie, headers={"Origin": url})
    assert no_csrf.status_code == 403 and "CSRF" in no_csrf.json()["error"]
