"""The panel's atoms page in a real browser against a real panel process, on atoms the worker's
stages made (run in this process): a plan shows its deadline on the clock of the memory that said it, and the type
filter shows plans only."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import all_processed, db_rows, memory_service, run_every_stage, write_config
from panel_helpers import chromium_page, panel_process
from shared.config import load_config
from shared.store import open_store
from shared.store.model.documents import MemoryFields

pytestmark = pytest.mark.slow

BEIJING = timezone(timedelta(hours=8))
LUNCH = "I will meet Anna for lunch next Friday at 1pm."
REPORT = "我下周三要交季度报告。"
CAT = "I have a cat named Luna."


@pytest.fixture
def plans(tmp_path):
    """Three memories said in Beijing time today (two plans, one not), their atoms made by the
    worker's stages, and a panel on the store: yields (config, url, token, {text: memory id})."""
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(tmp_path, embedding={"provider": "openai", "base_url": api.base_url,
                                                   "model": "fake", "dimensions": 32})
        store = open_store(load_config(config).storage)
        said = datetime.now(BEIJING).replace(microsecond=0)
        service = memory_service(store)
        ids = {text: service.memorize(text, MemoryFields(persona_id="plans", original_time=said)).id
               for text in (LUNCH, REPORT, CAT)}
        store.close()
        run_every_stage(config)
        assert all_processed(config, len(ids))
        with panel_process(config) as (url, token):
            yield config, url, token, ids


def stored_plan(config, memory_id: int) -> tuple[int, datetime]:
    """(atom id, deadline on the Beijing clock) of a memory's planned atom."""
    (atom_id, deadline), = db_rows(config, "SELECT id, deadline FROM memory_atoms WHERE memory_id = ?"
                                           " AND type = 'planned' AND state = 'active'", (memory_id,))
    return atom_id, datetime.fromtimestamp(deadline, BEIJING)


def test_plans_show_their_deadline_on_their_own_clock(plans):
    config, url, token, ids = plans
    lunch, lunch_due = stored_plan(config, ids[LUNCH])
    report, report_due = stored_plan(config, ids[REPORT])
    # What the rules resolved: Friday 13:00 and the end of Wednesday, in Beijing time.
    assert (lunch_due.strftime("%A"), lunch_due.hour, lunch_due.minute) == ("Friday", 13, 0)
    assert (report_due.strftime("%A"), report_due.hour, report_due.minute) == ("Wednesday", 23, 59)
    cat_types = {t for (t,) in db_rows(config, "SELECT type FROM memory_atoms WHERE memory_id = ?", (ids[CAT],))}
    assert "planned" not in cat_types
    with chromium_page() as page:
        page.goto(f"{url}/atoms?type=planned&token={token}")
        rows = page.locator("#atoms tr.atom").evaluate_all("els => els.map(e => e.id)")
        assert set(rows) == {f"atom-{lunch}", f"atom-{report}"}
        assert page.locator("select[name=type]").input_value() == "planned"
        shown = page.locator(f"#atom-{lunch} .deadline")
        assert shown.inner_text() == f"deadline: {lunch_due:%a %d %b %Y}, 13:00 (UTC+08:00)"
        as_utc = lunch_due.astimezone(timezone.utc)
        assert shown.get_attribute("title") == f"{as_utc:%Y-%m-%d %H:%M} UTC"
        assert page.locator(f"#atom-{report} .deadline").inner_text() == (
            f"deadline: end of {report_due:%a %d %b %Y} (UTC+08:00)")
        assert "left" in page.locator(f"#atom-{lunch} .life").inner_text()
        # The other types' filter leaves the plans out; no filter shows every atom.
        page.goto(f"{url}/atoms?type=factual")
        assert not {f"atom-{lunch}", f"atom-{report}"} & set(
            page.locator("#atoms tr.atom").evaluate_all("els => els.map(e => e.id)"))
        page.goto(f"{url}/atoms")
        assert page.locator("#atoms .deadline").count() == 2
        # Whose each atom is; an attribute and value only where the atom has them.
        subjects = page.locator("#atoms tr.atom .muted").all_inner_texts()
        assert "self" in subjects and not any("None" in line for line in subjects)
