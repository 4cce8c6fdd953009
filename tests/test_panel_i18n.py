"""The panel's two catalogues and its templates, without a browser: every key in both
languages with the same placeholders, no visible English left in a template, the language and
zone choices, the pipeline's warnings as shared/pipeline_warnings.py says them, and how long until
every memory is searchable by meaning as shared/catch_up.py says it."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from aokun_panel import words, zones
from aokun_panel.i18n import LANGS, catalogue, choose_language, js_strings, translate
from shared.catch_up import CatchUp, StagePace, pace
from shared.pipeline_warnings import format_age, pipeline_warnings

TEMPLATES = Path(__file__).resolve().parent.parent / "aokun_panel" / "templates"
PLACEHOLDER = re.compile(r"\{(\w+)\}")
# Words a template may show as they are, in both languages: the product's name, the language
# names of the switch, units and technical names that are the same in Chinese text.
ALLOWED = {"Aokun", "Memory", "English", "MB", "pid", "UTC"}


def test_both_catalogues_have_the_same_keys_and_placeholders():
    english, chinese = catalogue("en"), catalogue("zh")
    assert set(english) == set(chinese), set(english) ^ set(chinese)
    for key, text in english.items():
        assert text.strip() and chinese[key].strip(), key
        assert set(PLACEHOLDER.findall(text)) == set(PLACEHOLDER.findall(chinese[key])), key


def test_the_chinese_catalogue_is_chinese():
    """Each Chinese text holds Chinese, unless it is only names, numbers and placeholders."""
    for key, text in catalogue("zh").items():
        bare = PLACEHOLDER.sub("", text)
        if re.search(r"[A-Za-z]{3,}", bare) and not re.search(r"[\u4e00-\u9fff]", bare):
            assert key.startswith(("js.graph.of", "nav.")) or bare.strip() in {"Worker"}, (key, text)


def visible_text(template: str) -> list[str]:
    """The text a template shows itself: between tags and in the attributes people read
    (placeholder, title, aria-label), with Jinja expressions, scripts, styles and <code>
    removed (commands and file names are not translated)."""
    text = re.sub(r"\{#.*?#\}|\{%.*?%\}", " ", template, flags=re.S)
    text = re.sub(r"<(script|style|code)\b.*?</\1>", " ", text, flags=re.S)
    shown = re.findall(r'(?:placeholder|title|aria-label)="([^"]*)"', text)
    text = re.sub(r"<[^>]*>", " ", text)
    shown.append(text)
    return [re.sub(r"\{\{.*?\}\}", " ", part, flags=re.S) for part in shown]


@pytest.mark.parametrize("template", sorted(p.name for p in TEMPLATES.glob("*.html")))
def test_templates_show_no_untranslated_english(template):
    source = (TEMPLATES / template).read_text(encoding="utf-8")
    found = {word for part in visible_text(source) for word in re.findall(r"[A-Za-z]{2,}", part)}
    assert found <= ALLOWED, f"{template} shows {sorted(found - ALLOWED)} outside t(...)"


def test_the_check_would_see_a_literal():
    assert "Save" in " ".join(visible_text('<button title="{{ t(\'x\') }}">Save</button>'))
    assert "filter" in " ".join(visible_text('<input placeholder="filter settings">'))


def test_the_language_comes_from_the_cookie_then_the_browser():
    assert choose_language(None, "zh-CN,zh;q=0.9,en;q=0.8") == "zh"
    assert choose_language(None, "zh-TW") == "zh"
    assert choose_language(None, "en-US,en;q=0.9,zh-CN;q=0.8") == "en"
    assert choose_language(None, "fr-FR, zh;q=0.5") == "en"
    assert choose_language(None, "de;q=0.3, zh-CN;q=0.7") == "zh"
    assert choose_language(None, "") == "en" and choose_language(None, None) == "en"
    assert choose_language("zh", "en-US") == "zh" and choose_language("en", "zh-CN") == "en"
    assert choose_language("fr", "zh-CN") == "zh"  # a cookie naming no language of ours is ignored


def test_translate_fills_placeholders_and_leaves_other_braces():
    assert translate("en", "common.page", n=3) == "page 3"
    assert translate("zh", "common.page", n=3) == "第 3 页"
    assert '{"section.key": value}' in translate("en", "settings.send_json")
    assert translate("zh", "no.such.key") == "no.such.key"
    for lang in LANGS:
        strings = js_strings(lang)
        assert "settings.saving" in strings and "node.person" in strings and "type.planned" in strings


@pytest.mark.parametrize("queue, workers, newest", [
    ({"pending": 3, "running": 1}, 0, None),
    ({"pending": 1}, 0, 1_000.0),
    ({"stuck": 1, "retrying": 2, "failed": 5}, 1, 9_000.0),
    ({"pending": 4, "failed": 1}, 2, 9_990.0),
])
def test_the_english_warnings_are_shared_healths(queue, workers, newest):
    assert words.pipeline_warnings("en", queue, workers, newest, 10_000.0) == \
        pipeline_warnings(queue, workers, newest, 10_000.0)
    chinese = words.pipeline_warnings("zh", queue, workers, newest, 10_000.0)
    assert len(chinese) == len(pipeline_warnings(queue, workers, newest, 10_000.0))
    assert all(re.search(r"[\u4e00-\u9fff]", line) for line in chinese)


def caught_up(workers: int, *stages: tuple[int, int, float]) -> CatchUp:
    """(waiting, done, window_s) of embed, atoms and graph."""
    return CatchUp(tuple(StagePace(name, *figures) for name, figures in zip(("embed", "atoms", "graph"), stages)),
                   workers)


@pytest.mark.parametrize("found", [
    caught_up(1, (0, 0, 300.0), (0, 0, 300.0), (0, 0, 300.0)),
    caught_up(0, (1234, 5, 300.0), (1300, 0, 300.0), (1300, 0, 300.0)),
    caught_up(2, (1, 0, 300.0), (4, 0, 300.0), (4, 2, 300.0)),
    caught_up(1, (940, 300, 300.0), (1294, 6, 300.0), (1300, 0, 300.0)),
    caught_up(1, (666, 1234, 59.96), (2000, 0, 59.96), (0, 0, 59.96)),
    caught_up(1, (5, 100_000, 300.0), (5, 1, 300.0), (5, 0, 300.0)),
])
def test_the_english_catch_up_is_the_clis(found):
    english = words.catch_up("en", found.as_dict())
    assert english["line"] == found.line()
    assert [(p["stage"], p["waiting"], p["pace"]) for p in english["stages"]] == [
        (p.stage, p.waiting, pace(p.per_s) if p.per_s else "") for p in found.stages]
    chinese = words.catch_up("zh", found.as_dict())
    assert re.search(r"[\u4e00-\u9fff]", chinese["line"]) and chinese["line"] != english["line"]
    assert all(re.search(r"[\u4e00-\u9fff]", p["estimate"]) for p in chinese["stages"])


@pytest.mark.parametrize("seconds", [0, 40, 89, 90, 3000, 5399, 5400, 7200, 172_799, 172_800, 900_000])
def test_ages_round_as_shared_health_does(seconds):
    assert words.age("en", seconds) == format_age(seconds)


def test_zones_parse_names_offsets_and_refuse_the_rest():
    assert zones.parse("UTC").tz == timezone.utc and zones.parse("Etc/UTC").name == "UTC"
    assert zones.parse("Asia/Shanghai").name == "Asia/Shanghai"
    assert zones.parse("%2B08%3A00") == zones.parse("+08:00")  # as the cookie carries it
    assert zones.parse("+08:00").tz.utcoffset(None) == timedelta(hours=8)
    assert zones.parse("-05:30").name == "-05:30"
    for bad in ("", None, "Mars/Olympus", "../../etc/passwd", "+25:00", "x" * 200):
        assert zones.parse(bad) is None, bad
    chosen = zones.chosen({zones.BROWSER_COOKIE: "Europe/Lisbon"})
    assert chosen.name == "Europe/Lisbon"
    assert zones.chosen({zones.CHOSEN_COOKIE: "UTC", zones.BROWSER_COOKIE: "Europe/Lisbon"}).name == "UTC"
    assert zones.chosen({zones.CHOSEN_COOKIE: "nonsense"}).name == "UTC"


def test_times_of_every_clock_show_in_the_one_zone():
    beijing = datetime(2024, 5, 8, 21, 56, tzinfo=timezone(timedelta(hours=8)))
    new_york = datetime(2024, 5, 8, 8, 56, tzinfo=timezone(timedelta(hours=-5)))
    utc = zones.parse("UTC")
    assert utc.when(beijing) == "2024-05-08 13:56" and utc.when(new_york) == "2024-05-08 13:56"
    assert utc.when(beijing.timestamp()) == "2024-05-08 13:56"
    assert zones.parse("Asia/Shanghai").when(new_york) == "2024-05-08 21:56"
    assert utc.when(datetime(2024, 5, 8, 13, 56)) == "2024-05-08 13:56"  # naive: taken as UTC
    assert zones.zone_of(beijing) == "+08:00" and zones.zone_of(datetime(2024, 1, 1)) is None


def test_every_setting_is_described_in_chinese_too():
    from aokun_panel.config_file import example_settings
    from aokun_panel.pages.settings import described_in, setting_descriptions

    sections = example_settings()
    wanted = {s.key for settings in sections.values() for s in settings}
    wanted |= {f"note.{s.key}" for settings in sections.values() for s in settings if s.note}
    assert set(setting_descriptions("zh")) == wanted
    assert all(HAN.search(text) or "|" in text for text in setting_descriptions("zh").values())
    top_k = described_in("zh", "memory.recall_top_k", "results when recall is called without k")
    assert top_k == "调用 recall 时未指定 k 返回的结果数"
    assert described_in("en", "memory.recall_top_k", "english") == "english"


HAN = re.compile(r"[\u4e00-\u9fff]")
