"""Aware times in the user's zone (shared/time_zone.py): the time parser and every stage that
reads times — atoms, the rules summarizer, the transcript readers — driven with naive and
aware times in many zones, DST changes included, and every month/day form in both languages.
Nothing raises, and a resolved date is the expected day on the user's clock."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claude_code import dated_transcript
from shared.config import AtomsConfig, SummarizerConfig, TextConfig
from shared.extract.atomize import AtomRules, draft_atoms
from shared.extract.timeparse import date_mentions, deadline
from shared.store.model.documents import Document, MemoryFields, stored_text
from shared.summarize.conversation import Turn
from shared.summarize.rules import RulesSummarizer
from shared.summarize.transcripts import dated, read_transcript
from shared.text.segment import Segmenter
from shared.time_zone import in_zone, on_clock, parse, user_zone

# Zones with unusual offsets (+14, -03:30, +10:30 with a half-hour DST) and DST changes at
# 02:00, at midnight (Santiago) and none at all.
ZONES = ("UTC", "America/Los_Angeles", "Asia/Shanghai", "Pacific/Kiritimati", "America/St_Johns",
         "Europe/London", "Australia/Lord_Howe", "America/Santiago", "Asia/Kolkata")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
ZH_NUMBERS = "一二三四五六七八九十"

zones = st.sampled_from(ZONES).map(ZoneInfo)
# Local times around the DST changes of 2024-2026 as often as anywhere else.
local_times = st.one_of(
    st.datetimes(datetime(1995, 1, 1), datetime(2150, 12, 31)),
    st.sampled_from([datetime(2025, 3, 9, 1, 30), datetime(2025, 3, 9, 2, 30), datetime(2025, 11, 2, 1, 30),
                     datetime(2025, 3, 30, 0, 30), datetime(2025, 10, 26, 1, 30), datetime(2025, 4, 5, 23, 59),
                     datetime(2025, 9, 6, 23, 30), datetime(2024, 12, 31, 23, 59, 59), datetime(2025, 1, 1)])
    .flatmap(lambda t: st.integers(-90, 90).map(lambda m: t + timedelta(minutes=m))))


def zh_count(n: int) -> str:
    """12 -> 十二, 20 -> 二十, 5 -> 五."""
    tens, ones = divmod(n, 10)
    return (("" if tens == 1 else ZH_NUMBERS[tens - 1]) + "十" if tens else "") + (ZH_NUMBERS[ones - 1] if ones else "")


def month_day_forms(month: int, day: int) -> list[str]:
    name = MONTHS[month - 1]
    suffix = {1: "st", 2: "nd", 3: "rd", 21: "st", 22: "nd", 23: "rd"}.get(day, "th")
    return [f"I'm moving to Berlin on {name} {day}", f"The wedding is on {name[:3]} {day}{suffix}",
            f"I fly out {day} {name}", f"the deadline is the {day}{suffix} of {name}",
            f"我{month}月{day}日要去上海", f"我{month}月{day}号要去上海", f"{zh_count(month)}月{zh_count(day)}日交报告",
            f"The report is due on {month}/{day}", f"我{month}/{day}号出发"]


def next_on_or_after(local: date, month: int, day: int) -> date:
    """The plan reading of a month and day without a year: this year's, else next year's."""
    this_year = date(local.year, month, day)
    return this_year if this_year >= local else date(local.year + 1, month, day)


def given_as(local: datetime, zone: ZoneInfo, form: str) -> datetime | None:
    """The same local moment given the ways a caller gives it: naive (read in the zone), on the
    zone's clock, as the UTC moment a transcript's "Z" writes, or not at all ("none")."""
    on_zone = local.replace(tzinfo=zone)
    return {"naive": local, "zone": on_zone, "utc": on_zone.astimezone(timezone.utc), "none": None}[form]


def anchored(local: datetime, zone: ZoneInfo, form: str) -> datetime:
    """given_as, put on the clock the callers put it on (time_zone.on_clock)."""
    return on_clock(given_as(local, zone, form), zone)


anchor_forms = st.sampled_from(("naive", "zone", "utc"))


def local_date_of(moment: datetime, zone: ZoneInfo) -> date:
    """The day an aware moment falls on for the user: its instant read on the zone's clock."""
    return datetime.fromtimestamp(moment.timestamp(), zone).date()


# -- the parser -----------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(zones, local_times, anchor_forms, st.integers(1, 12), st.integers(1, 28), st.data())
def test_a_month_and_day_is_due_at_the_end_of_that_day_on_the_users_clock(zone, local, form, month, day, data):
    anchor = anchored(local, zone, form)
    text = data.draw(st.sampled_from(month_day_forms(month, day)))
    due = deadline(text, anchor)
    mentions = date_mentions(text, anchor) + date_mentions(text, anchor, past=True)
    assert due is not None, text
    assert due.tzinfo is anchor.tzinfo
    assert (due.date(), due.time()) == (next_on_or_after(anchor.date(), month, day), time(23, 59, 59))
    assert local_date_of(due, zone) == due.date()
    assert all(m.day.tzinfo is anchor.tzinfo and (m.day.month, m.day.day) == (month, day) for m in mentions)


RELATIVE = {  # text -> (days from the local anchor's day, (hour, minute) or None for the day's end)
    "dentist at 3pm tomorrow": (1, (15, 0)), "tomorrow at 3pm": (1, (15, 0)),
    "明天下午3点看牙医": (1, (15, 0)), "明天下午三点半开会": (1, (15, 30)),
    "call the plumber tomorrow": (1, None), "明天我要去医院": (1, None), "后天去北京": (2, None),
    "the day after tomorrow": (2, None), "dinner tonight at 8": (0, (20, 0)), "今晚八点吃饭": (0, (20, 0)),
}
WEEKDAY_PLANS = {"下周二看牙医": 1, "next Tuesday I see the dentist": 1, "下周四出差": 3, "next Thursday": 3,
                 "下个星期五交报告": 4}


@settings(max_examples=300, deadline=None)
@given(zones, local_times, anchor_forms, st.sampled_from(sorted(RELATIVE)))
def test_relative_days_and_clock_times_are_the_users(zone, local, form, text):
    anchor = anchored(local, zone, form)
    days, clock = RELATIVE[text]
    due = deadline(text, anchor)
    expected_day = anchor.date() + timedelta(days=days)
    assert due is not None and due.tzinfo is anchor.tzinfo
    assert due.date() == expected_day
    assert (due.hour, due.minute) == (clock or (23, 59))
    assert local_date_of(due, zone) == expected_day


@settings(max_examples=200, deadline=None)
@given(zones, local_times, anchor_forms, st.sampled_from(sorted(WEEKDAY_PLANS)))
def test_next_weeks_day_is_that_day_of_the_users_next_week(zone, local, form, text):
    anchor = anchored(local, zone, form)
    due = deadline(text, anchor)
    monday = anchor.date() - timedelta(days=anchor.weekday())
    assert due is not None and due.date() == monday + timedelta(weeks=1, days=WEEKDAY_PLANS[text])
    assert local_date_of(due, zone) == due.date()


@settings(max_examples=200, deadline=None)
@given(zones, local_times, anchor_forms, st.integers(1, 48))
def test_hours_from_now_are_counted_in_real_time(zone, local, form, hours):
    """"in 5 hours" is five hours of the clock on the wall, across a DST change too."""
    anchor = anchored(local, zone, form)
    due = deadline(f"I'll be back in {hours} hours", anchor)
    assert due is not None and due.tzinfo is anchor.tzinfo
    # exact, unlike floats
    assert due.astimezone(timezone.utc) - anchor.astimezone(timezone.utc) == timedelta(hours=hours)


MIXED = ("下周二", "十二月二十日", "tomorrow at 3pm", "Jan 15th", "15 January", "1/15", "3天后", "两个小时后",
         "下个月5号", "this weekend", "end of next month", "明年三月", "in May", "last Friday", "上周三",
         "the 14th", "月底", "in 2 weeks", "2023年5月12日", "March 5, 2024", "at noon", "noon tomorrow")


@settings(max_examples=300, deadline=None)
@given(st.one_of(zones, st.just(None)), st.datetimes(datetime(1904, 1, 1), datetime(2196, 12, 31)),
       st.lists(st.sampled_from(MIXED), min_size=1, max_size=3), st.booleans())
def test_the_parser_never_raises_and_answers_on_the_anchors_clock(zone, local, parts, past):
    """Naive anchors give naive times, aware ones times on the same clock: never the two mixed."""
    anchor = local if zone is None else on_clock(local.replace(tzinfo=zone), zone)
    text = "，".join(parts) if any("\u4e00" <= c <= "\u9fff" for c in "".join(parts)) else ", ".join(parts)
    found = [deadline(text, anchor)] + [m.day for m in date_mentions(text, anchor, past=past)]
    assert all(t.tzinfo is anchor.tzinfo for t in found if t is not None)


# -- the stages -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rules():
    return AtomRules.load()


@pytest.fixture(scope="module")
def summarizer(rules):
    return RulesSummarizer(rules, Segmenter(TextConfig()))


PLANS = {  # a plan stated, and (days from the day it was said, (hour, minute) or None)
    "I have a dentist appointment at 3pm tomorrow.": (1, (15, 0)),
    "我明天下午3点要去看牙医。": (1, (15, 0)),
    "I need to call the plumber tomorrow.": (1, None),
}
STAGE_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def document(text: str, original_time: datetime | None, create_time: float) -> Document:
    return Document(1, text, "h", MemoryFields(original_time=original_time), False, 0, None, create_time, create_time)


@STAGE_SETTINGS
@given(zones, local_times.filter(lambda t: 2000 <= t.year <= 2100), st.sampled_from(("naive", "zone", "utc", "none")),
       st.sampled_from(sorted(PLANS)))
def test_an_atoms_plan_is_due_on_the_users_day(rules, zone, local, form, text):
    on_zone = local.replace(tzinfo=zone)
    [draft] = draft_atoms(document(text, given_as(local, zone, form), on_zone.timestamp()), rules, AtomsConfig(), zone)
    assert draft.type == "planned", text
    days, clock = PLANS[text]
    said = datetime.fromtimestamp(on_zone.timestamp(), zone)  # the instant, on the user's clock
    due = datetime.fromtimestamp(draft.deadline, zone)
    assert due.date() == said.date() + timedelta(days=days)
    assert (due.hour, due.minute) == (clock or (23, 59))


def test_dentist_at_3pm_without_an_original_time_is_3pm_in_los_angeles(rules):
    """The issue's case: stored at 18:00 in Los Angeles (02:00 UTC the next day)."""
    la = ZoneInfo("America/Los_Angeles")
    stored = datetime(2026, 3, 3, 18, 0, tzinfo=la).timestamp()
    [draft] = draft_atoms(document("Dentist at 3pm tomorrow.", None, stored), rules, AtomsConfig(), la)
    assert datetime.fromtimestamp(draft.deadline, la) == datetime(2026, 3, 4, 15, 0, tzinfo=la)
    [utc] = draft_atoms(document("Dentist at 3pm tomorrow.", None, stored), rules, AtomsConfig(), timezone.utc)
    assert datetime.fromtimestamp(utc.deadline, timezone.utc) == datetime(2026, 3, 5, 15, 0, tzinfo=timezone.utc)


def test_a_time_with_its_own_offset_keeps_its_clock(rules):
    """+08:00 says where it was said: "3pm tomorrow" is Beijing's, whatever the user's zone."""
    beijing = timezone(timedelta(hours=8))
    said = datetime(2026, 3, 3, 9, 0, tzinfo=beijing)
    [draft] = draft_atoms(document("我明天下午3点要去看牙医。", said, 0.0), rules, AtomsConfig(),
                          ZoneInfo("America/Los_Angeles"))
    assert datetime.fromtimestamp(draft.deadline, beijing) == datetime(2026, 3, 4, 15, 0, tzinfo=beijing)


DATED_TURNS = [("Sam", "I'm moving to Berlin on January 15, I'm so excited about it."),
               ("Alex", "That's a big step! What about your flat here?"),
               ("Sam", "我12月20日要去上海见我妈妈，然后回来收拾东西。"),
               ("Alex", "Sounds like a plan. Dentist at 3pm tomorrow still on?"),
               ("Sam", "Yes, I have a dentist appointment at 3pm tomorrow.")]


@STAGE_SETTINGS
@given(zones, local_times.filter(lambda t: 1990 <= t.year <= 2150), st.sampled_from(("naive", "zone", "utc", "none")))
def test_the_rules_summarizer_reads_dated_turns_on_the_users_clock(summarizer, zone, local, form):
    on_zone = local.replace(tzinfo=zone)
    said = [Turn(speaker, text, given_as(local, zone, form)) for speaker, text in DATED_TURNS]
    turns = dated(said, on_zone.astimezone(timezone.utc), zone)
    assert all(t.time.tzinfo is zone for t in turns)
    memory = summarizer.summarize(turns, SummarizerConfig())
    berlin = next(f for f in memory.key_facts if "Berlin" in f)
    day_said = datetime.fromtimestamp(on_zone.timestamp(), zone).date()  # on the user's clock
    assert f"15 January {next_on_or_after(day_said, 1, 15).year}" in berlin, berlin


def claude_transcript(path: Path, start: datetime, turns: list[tuple[str, str]]) -> Path:
    """A Claude Code session file, its timestamps in UTC with a Z as Claude Code writes them."""
    return dated_transcript(path, [("user" if n % 2 == 0 else "assistant", text)
                                   for n, (_, text) in enumerate(turns)], start)


@STAGE_SETTINGS
@given(zones, local_times.filter(lambda t: 1990 <= t.year <= 2150))
def test_a_claude_code_transcript_with_z_times_is_read_and_summarized(tmp_path_factory, summarizer, zone, local):
    path = claude_transcript(tmp_path_factory.mktemp("t") / "session.jsonl", local.replace(tzinfo=zone), DATED_TURNS)
    turns = dated(read_transcript(path), None, zone)
    assert turns and all(t.time.tzinfo is zone for t in turns)
    memory = summarizer.summarize(turns, SummarizerConfig())
    assert any("Berlin" in f for f in memory.key_facts)


# -- the zone and the marker ----------------------------------------------------------------


def test_the_configured_zone_and_the_machines():
    assert user_zone("America/Los_Angeles") == ZoneInfo("America/Los_Angeles")
    assert user_zone("+08:00").utcoffset(None) == timedelta(hours=8)
    assert user_zone("") is not None and parse("Mars/Olympus") is None
    naive = datetime(2026, 3, 8, 15, 0)
    assert in_zone(naive, ZoneInfo("Asia/Shanghai")).utcoffset() == timedelta(hours=8)
    z = datetime(2026, 3, 7, 23, 0, tzinfo=timezone.utc)
    assert on_clock(z, ZoneInfo("America/Los_Angeles")).hour == 15  # PST, the day before DST starts
    plus8 = datetime(2026, 3, 8, 23, 0, tzinfo=timezone(timedelta(hours=8)))
    assert on_clock(plus8, ZoneInfo("America/Los_Angeles")) is plus8


def test_a_memory_without_a_time_is_marked_on_the_users_clock():
    stored = datetime(2026, 3, 4, 2, 30, tzinfo=timezone.utc).timestamp()
    assert stored_text("x", None, stored, ZoneInfo("America/Los_Angeles")) == "[2026-03-03 18:30] x"
    assert stored_text("x", None, stored) == "[2026-03-04 02:30] x"
