"""Questions about time are answered by time: recall reads a question's window on when things
happen (shared/search/timeframe.py) and ranks what happens inside it first — plans by their
deadline, events by their stated dates (shared/search/happening.py); recall's happens_after /
happens_before give the window explicitly.

The window tests read questions in both languages against a fixed moment; the recall tests
memorize plans and events told days earlier through the official MCP client, let the worker's stages (run here)
derive their atoms, and ask, on a pinned clock (memory.time_zone, Los Angeles: its days end in
the next UTC day), every date built from today on that clock."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import db_rows, front_in_process, run_every_stage, write_config
from shared.config import RetrievalConfig, TextConfig
from shared.search import timeframe
from shared.text.segment import Segmenter

ASKED = datetime(2026, 12, 2, 10, 0, tzinfo=timezone.utc)  # a Wednesday
NOW = ASKED.timestamp()
ZONE = "America/Los_Angeles"  # the user's clock of the recall tests
LA = ZoneInfo(ZONE)


def at(*day: int) -> float:
    return datetime(*day, tzinfo=timezone.utc).timestamp()


@pytest.fixture(scope="module")
def read():
    segmenter = Segmenter(TextConfig())
    return lambda question: timeframe.read(question, segmenter.unique_terms, NOW, RetrievalConfig().plan_cues)


@pytest.mark.parametrize("question, start, end", [
    ("What's on my calendar next week?", at(2026, 12, 7), at(2026, 12, 14)),
    ("我下周有什么安排？", at(2026, 12, 7), at(2026, 12, 14)),
    ("下周我有哪些事？", at(2026, 12, 7), at(2026, 12, 14)),
    ("明天我要做什么？", at(2026, 12, 3), at(2026, 12, 4)),
    ("Anything I need to do tomorrow?", at(2026, 12, 3), at(2026, 12, 4)),
    ("这周末有什么安排？", at(2026, 12, 5), at(2026, 12, 7)),
    ("What am I doing this weekend?", at(2026, 12, 5), at(2026, 12, 7)),
    ("What do I have planned in the next three weeks?", NOW, at(2026, 12, 24)),
    ("接下来一个月有什么安排？", NOW, at(2027, 1, 3)),
    ("未来两周有什么事？", NOW, at(2026, 12, 17)),
    ("What's coming up in the coming weeks?", NOW, at(2026, 12, 24)),
    ("三月有什么安排？", at(2027, 3, 1), at(2027, 4, 1)),
    ("What do I have in March?", at(2027, 3, 1), at(2027, 4, 1)),
    ("下个月有什么计划？", at(2027, 1, 1), at(2027, 2, 1)),
    ("我这个月还有什么安排？", at(2026, 12, 1), at(2027, 1, 1)),
    ("明天有空吗？", at(2026, 12, 3), at(2026, 12, 4)),
    ("Am I busy on Friday?", at(2026, 12, 4), at(2026, 12, 5)),
    ("我这几天有什么安排？", at(2026, 11, 29), at(2026, 12, 6)),
    ("what's coming up?", NOW, None),
    ("我接下来有什么安排？", NOW, None),
])
def test_an_agenda_question_names_a_window_ahead(read, question, start, end):
    asked = read(question)
    assert (asked.window.start, asked.window.end, asked.agenda, asked.ahead) == (start, end, True, True)


@pytest.mark.parametrize("question, start, end, agenda", [
    ("What did I do last week?", at(2026, 11, 23), at(2026, 11, 30), True),
    ("上周我做了什么？", at(2026, 11, 23), at(2026, 11, 30), True),
    ("What happened in the past few days?", at(2026, 11, 29), NOW, True),
    ("What did I plant recently?", NOW - 30 * 86_400, NOW, False),
    ("我最近在玩什么游戏？", NOW - 30 * 86_400, NOW, False),
])
def test_a_question_about_the_past_names_a_window_behind(read, question, start, end, agenda):
    asked = read(question)
    assert (asked.window.start, asked.window.end, asked.agenda, asked.ahead) == (start, end, agenda, False)


def test_a_question_about_one_thing_in_a_window_is_no_agenda(read):
    asked = read("When is my haircut next month?")
    assert (asked.window.start, asked.window.end, asked.agenda) == (at(2027, 1, 1), at(2027, 2, 1), False)
    # "recently" beside a date is no second window
    asked = read("What movie did Joanna recently watch on October 6, 2022?")
    assert (asked.window.start, asked.window.end) == (at(2022, 10, 6), at(2022, 10, 7))


@pytest.mark.parametrize("question", ["What kind of dog do we have?", "我儿子周末有什么课？", "我对什么食物过敏？",
                                      "Who is Ivy's father?"])
def test_a_question_without_time_words_has_no_window(read, question):
    assert read(question) is None


# -- through the MCP client -------------------------------------------------------------------


def next_week(today: date) -> tuple[date, date]:
    monday = today - timedelta(days=today.weekday()) + timedelta(weeks=1)
    return monday, monday + timedelta(days=6)


def en(day: date) -> str:
    return f"{day:%B} {day.day}"


def zh(day: date) -> str:
    return f"{day.month}月{day.day}日"


@pytest.fixture(scope="module")
def told(tmp_path_factory):
    """A session on a store of plans (next week, tomorrow, next month) and past events, each
    told days before; {key: id}, {key: the plan's date}."""
    now = datetime.now(LA).replace(microsecond=0)
    today = now.date()
    monday, _ = next_week(today)
    last_wednesday = monday - timedelta(days=12)
    plans = {"dentist": monday + timedelta(days=1), "trip": monday + timedelta(days=3),
             "checkup": monday + timedelta(days=4), "plumber": today + timedelta(days=1),
             "kyoto": today + timedelta(days=35)}
    memories = {
        "dentist": (f"Dentist appointment on {en(plans['dentist'])} at 3pm.", 3),
        "trip": (f"Business trip to Chicago on {en(plans['trip'])}.", 2),
        "checkup": (f"{zh(plans['checkup'])}去医院做体检。", 1),
        "plumber": ("I need to call the plumber tomorrow about the leaking sink.", 0.0007),
        "kyoto": (f"Flying to Kyoto for the cherry blossoms on {en(plans['kyoto'])}.", 5),
        "hike": (f"Went hiking at Mount Tam on {en(last_wednesday)}; the views were great.",  # told the day after
                 (today - last_wednesday).days - 1),
        "spain": ("Last summer we spent two weeks on holiday in Spain.", 150),
        "marathon": ("I ran the city marathon in 3 hours 50 minutes.", 40),
        "sister": ("My sister Mia lives in Boston.", 60),
    }
    folder = tmp_path_factory.mktemp("windows")
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(
            folder, memory={"time_zone": ZONE},
            embedding={"provider": "openai", "base_url": api.base_url, "model": "fake", "dimensions": 32},
            queue={"retry_base_s": 0.2}, server={"exposed_tools": ["memorize", "recall"]},
            retrieval={"access_reinforcement": False, "cache_enabled": False})
        with front_in_process(config) as s:
            ids = {}
            for key, (text, days_ago) in memories.items():
                said = (now - timedelta(days=days_ago)).isoformat()
                ids[key] = s.ok("memorize", {"content": text, "metadata": {
                    "persona_id": "me", "original_time": said}})["id"]
            run_every_stage(config)
            assert db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE status = 'done'") == \
                [(3 * len(memories),)]
            yield s, ids, plans, today


def recalled(s, question: str, **arguments) -> list[dict]:
    return s.ok("recall", {"query": question, "persona_id": "me", "k": 5, **arguments})["results"]


def plans_between(plans: dict, ids: dict, first: date, last: date) -> list[int]:
    return [ids[key] for key, day in sorted(plans.items(), key=lambda item: item[1]) if first <= day <= last]


@pytest.mark.slow
@pytest.mark.parametrize("question", ["What do I have next week?", "我下周有什么安排？"])
def test_next_week_answers_the_plans_of_next_week_first(told, question):
    s, ids, plans, today = told
    expected = plans_between(plans, ids, *next_week(today))
    results = recalled(s, question)
    assert [r["id"] for r in results[:len(expected)]] == expected  # soonest first
    assert all(r["score"] >= 0.5 for r in results[:len(expected)])


@pytest.mark.slow
def test_tomorrow_answers_tomorrows_plan(told):
    s, ids, plans, today = told
    tomorrow = today + timedelta(days=1)
    assert [r["id"] for r in recalled(s, "明天我要做什么？")][:1] == plans_between(plans, ids, tomorrow, tomorrow)


@pytest.mark.slow
def test_coming_up_lists_every_plan_ahead_soonest_first(told):
    s, ids, plans, _ = told
    assert [r["id"] for r in recalled(s, "What's coming up?")] == plans_between(plans, ids, date.min, date.max)


@pytest.mark.slow
def test_last_week_answers_what_happened_then(told):
    s, ids, _, _ = told
    assert [r["id"] for r in recalled(s, "What did I do last week?")][:1] == [ids["hike"]]


@pytest.mark.slow
def test_an_explicit_window_on_when_things_happen(told):
    s, ids, plans, today = told
    monday, sunday = next_week(today)
    window = {"happens_after": monday.isoformat(), "happens_before": sunday.isoformat()}
    # a window the caller gives leaves out what happens outside it; a date is its whole day
    assert [r["id"] for r in recalled(s, "appointments", **window)] == plans_between(plans, ids, monday, sunday)
    # a question about one thing in it: that first, then the rest of the window, nothing outside
    chicago = [r["id"] for r in recalled(s, "Chicago", **window)]
    assert chicago[0] == ids["trip"] and set(chicago) == set(plans_between(plans, ids, monday, sunday))
    # since / until bound when a memory was told: the plans were told days before next week
    assert recalled(s, "appointments", since=monday.isoformat(), until=sunday.isoformat()) == []
    error = s.error("recall", {"query": "plans", "happens_after": sunday.isoformat(),
                               "happens_before": monday.isoformat()})
    assert error.startswith("happens_after (") and "is not before happens_before" in error
