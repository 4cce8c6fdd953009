"""The panel's forgetting page in a real browser against a real panel process: the curves it
draws are the worker's decay code's, for the current config and for settings being tried."""

from __future__ import annotations

import httpx
import pytest

from helpers import write_config
from panel_helpers import chromium_page, panel_process, screenshot
from shared.config import AtomsConfig
from shared.decay import ATOM_CURVES, atom_time_factor, decayed_importance
from shared.extract.atomize import ttl_days
from shared.store.model.atoms import ATOM_TYPES

pytestmark = pytest.mark.slow


def expected_importance(importance, accesses, days_since_access, rate, multiplier=0.5, window=30.0):
    """What 90 daily decays do, each one computed by the worker's decayed_importance."""
    values = [importance]
    for day in range(1, 91):
        recent = days_since_access is not None and days_since_access + day <= window
        importance, accesses = decayed_importance(importance, accesses, recent, rate, multiplier)
        values.append(importance)
    return values


@pytest.fixture
def panel(tmp_path):
    config = write_config(tmp_path, forgetting={"decay_rate": 0.02}, atoms={"ttl_factual_days": 120.0})
    with panel_process(config) as (url, token):
        yield url, token


def chart_data(page, form: str, chart: str, after: int) -> list:
    page.wait_for_function(f"Number(document.getElementById('{form}').dataset.version || 0) > {after}")
    return page.evaluate(f"aokunForgetting.{chart}.data")


def version(page, form: str) -> int:
    return int(page.locator(f"#{form}").get_attribute("data-version") or 0)


def test_the_decay_curve_is_the_workers_for_the_settings_tried(panel):
    url, token = panel
    with chromium_page() as page:
        page.goto(f"{url}/forgetting?token={token}")
        # Defaults: the current config (decay_rate 0.02), a memory of importance 0.5, never recalled.
        assert page.locator("#decay_rate").input_value() == "0.02"
        data = chart_data(page, "decay-form", "importance", 0)
        assert data[0] == list(range(91))
        assert data[1] == pytest.approx(expected_importance(0.5, 0, None, 0.02), abs=1e-12)
        # Try another rate on a memory recalled 3 times, 2 days ago.
        seen = version(page, "decay-form")
        page.fill("#decay-form input[name=importance]", "0.8")
        page.fill("#decay-form input[name=accesses]", "3")
        page.fill("#decay-form input[name=days_since_access]", "2")
        page.fill("#decay_rate", "0.05")
        page.wait_for_function(
            "aokunForgetting.importanceData"
            " && aokunForgetting.importanceData.settings['forgetting.decay_rate'] === 0.05"
            " && aokunForgetting.importanceData.memory.days_since_access === 2", timeout=10_000)
        data = chart_data(page, "decay-form", "importance", seen)
        tried = expected_importance(0.8, 3, 2, 0.05)
        assert data[1] == pytest.approx(tried, abs=1e-12)
        # Recalled memories fade slower: the first 28 days decay at 0.05 x 0.7, then at 0.05.
        assert data[1][1] == pytest.approx(0.8 * (1 - 0.05 * 0.7))
        assert data[2] == pytest.approx(expected_importance(0.8, 3, 2, 0.02), abs=1e-12)  # the current config
        assert page.locator("#decay_rate").get_attribute("class") == "changed"
        summary = page.locator("#decay-summary").inner_text()
        assert f"importance {tried[90]:.3f}" in summary
        below = next(day for day, v in enumerate(tried) if v < 0.1)
        assert f"below the archive threshold 0.1 on day {below}" in summary
        # A value the config loader refuses is refused with its message; the curve stays.
        page.fill("#decay_rate", "2")
        page.wait_for_selector("#problem:not([hidden])")
        assert "forgetting.decay_rate must be <= 1.0" in page.locator("#problem").inner_text()
        assert page.evaluate("aokunForgetting.importance.data")[1] == pytest.approx(tried, abs=1e-12)
        page.fill("#decay_rate", "0.05")
        page.wait_for_selector("#problem", state="hidden")
        screenshot(page, "forgetting")


def test_the_shelf_life_curves_follow_the_atoms_config(panel):
    url, token = panel
    config = AtomsConfig(ttl_factual_days=120.0)
    with chromium_page() as page:
        page.goto(f"{url}/forgetting?token={token}")
        data = chart_data(page, "atom-form", "atoms", 0)
        days = data[0]
        for index, atom_type in enumerate(ATOM_TYPES, start=1):
            ttl = ttl_days(atom_type, 0.5, 0, config)
            want = [atom_time_factor(atom_type, d, ttl) if d <= ttl else None for d in days]
            if ATOM_CURVES[atom_type] == "step":  # drawn with its drop to 0 where it expires
                want[next(i for i, d in enumerate(days) if d > ttl)] = 0.0
            assert data[index] == pytest.approx(want, abs=1e-12), atom_type
        rows = page.locator("#atom-table tbody tr").all_inner_texts()
        assert any(r.startswith("factual") and "120.0 d" in r for r in rows)
        # Reinforcements lengthen the shelf life: 120 x (0.5 + 0.5) x (1 + 0.5 x 2) = 240 days.
        seen = version(page, "atom-form")
        page.fill("#atom-form input[name=reinforcements]", "2")
        page.wait_for_function("aokunForgetting.atomsData && aokunForgetting.atomsData.reinforcements === 2")
        data = chart_data(page, "atom-form", "atoms", seen)
        factual = data[1 + ATOM_TYPES.index("factual")]
        last_valid = max(i for i, v in enumerate(factual) if v is not None)
        assert data[0][last_valid] <= 240 < data[0][last_valid + 1]
        assert factual[1] == pytest.approx(atom_time_factor("factual", data[0][1], 240.0))


def test_the_curve_endpoints_check_what_they_are_given(panel):
    url, token = panel
    with httpx.Client(base_url=url, cookies={"aokun_panel": token}) as client:
        ok = client.get("/api/forgetting/curve", params={"decay_rate": "0.1", "importance": "1"}).json()
        assert ok["tried"] == pytest.approx(expected_importance(1.0, 0, None, 0.1), abs=1e-12)
        assert ok["current_settings"]["forgetting.decay_rate"] == 0.02
        for params, message in [
            ({"decay_rate": "fast"}, "forgetting.decay_rate must be a number"),
            ({"access_count_decay_multiplier": "1.5"}, "forgetting.access_count_decay_multiplier must be <= 1.0"),
            ({"importance": "3"}, "importance must be a number from 0.0 to 1.0"),
        ]:
            answer = client.get("/api/forgetting/curve", params=params)
            assert answer.status_code == 400 and message in answer.json()["error"], answer.text
        atoms = client.get("/api/forgetting/atoms", params={"ttl_planned_days": "-1"})
        assert atoms.status_code == 400 and "atoms.ttl_planned_days must be >= 0.0" in atoms.json()["error"]
        bad = client.get("/api/forgetting/atoms", params={"reinforcements": "1.5"})
        assert bad.status_code == 400 and "reinforcements must be a whole number" in bad.json()["error"]
