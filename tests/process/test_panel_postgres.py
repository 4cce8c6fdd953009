"""The panel on a store on PostgreSQL: every page renders from the same interface,
and a change made in the panel is what the store then holds."""

from __future__ import annotations

import re

import httpx
import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import run_every_stage, write_config
from panel_helpers import panel_process
from servers import pg_store_url  # noqa: F401 (the fixture)
from shared.assembly import open_services
from shared.config import load_config
from shared.store.model.documents import MemoryFields

pytestmark = pytest.mark.slow
PAGES = ["/", "/memories", "/atoms", "/graph", "/queue", "/settings", "/forgetting", "/api/overview",
         "/api/queue", "/api/atoms/counts"]


def processed(config, memories: int) -> bool:
    services = open_services(load_config(config), queued=False)
    try:
        figures = services.store.stages.queue_figures(0.0)
        return figures["done"] == 3 * memories
    finally:
        services.close()


def test_every_page_renders_on_postgresql_and_an_edit_is_stored(tmp_path, pg_store_url):
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(tmp_path, storage={"backend": "postgresql", "url": pg_store_url},
                              embedding={"provider": "openai", "base_url": api.base_url, "model": "fake",
                                         "dimensions": 32})
        services = open_services(load_config(config), queued=False)
        try:
            ids = [services.memories.memorize(text, MemoryFields(persona_id="crew")).id for text in (
                "Mei works at St Mary's Hospital in Leeds", "Tom's birthday is on 4 March",
                "The crew meets every Friday at the harbour café")]
        finally:
            services.close()
        run_every_stage(config)  # the worker's own runner, in this process
        assert processed(config, 3)
        with panel_process(config) as (url, token):
            headers = {"X-Aokun-Token": token}
            for page in PAGES + [f"/memories/{ids[0]}", "/graph?persona=crew", "/memories?q=hospital"]:
                answer = httpx.get(f"{url}{page}", headers=headers, timeout=60)
                assert answer.status_code == 200, (page, answer.text[:500])
            listed = httpx.get(f"{url}/memories?q=hospital", headers=headers, timeout=60).text
            assert "St Mary" in listed
            page = httpx.get(f"{url}/memories/{ids[1]}", headers=headers, timeout=60).text
            csrf = re.search(r'name="csrf-token" content="([^"]+)"', page)
            assert csrf, "no CSRF token on the memory page"
            pinned = httpx.post(f"{url}/api/memories/{ids[1]}/pin", json={"pinned": True}, timeout=60,
                                headers={**headers, "X-CSRF-Token": csrf.group(1), "Origin": url})
            assert pinned.status_code == 200, pinned.text[:500]
    services = open_services(load_config(config), queued=False)
    try:
        assert services.store.documents.get(ids[1]).fields.pinned
    finally:
        services.close()
