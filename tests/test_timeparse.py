"""The time parser on the expressions people use for plans; every date below is worked by hand.

Calendar used: 2024-03-04 is a Monday, so 2024-03-06 is a Wednesday, 03-09 a Saturday and
03-10 a Sunday; 2024 is a leap year (29 February).
"""

from __future__ import annotations

from datetime import datetime

import pytest

from shared.extract.timeparse import date_mentions, deadline

WEDNESDAY = datetime(2024, 3, 6, 10, 0)
SATURDAY = datetime(2024, 3, 9, 10, 0)
SUNDAY = datetime(2024, 3, 10, 10, 0)


def end_of(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, 23, 59, 59)


@pytest.mark.parametrize("text, due", [
    # Weekends: the weekend's Sunday, end of day (a plan stays valid through the weekend).
    ("这个周末去爬山", end_of(2024, 3, 10)),
    ("我这周末要去看展", end_of(2024, 3, 10)),
    ("本周末大扫除", end_of(2024, 3, 10)),
    ("周末要去爬山", end_of(2024, 3, 10)),
    ("下周末回老家", end_of(2024, 3, 17)),
    ("下个周末回老家", end_of(2024, 3, 17)),
    ("下下周末搬家", end_of(2024, 3, 24)),
    ("I'm going hiking this weekend", end_of(2024, 3, 10)),
    ("We'll repaint the fence over the weekend", end_of(2024, 3, 10)),
    ("Let's have a barbecue next weekend", end_of(2024, 3, 17)),
    # Weeks: their Sunday.
    ("这周把报告写完", end_of(2024, 3, 10)),
    ("Finish the draft this week", end_of(2024, 3, 10)),
    ("下周去北京出差", end_of(2024, 3, 17)),
    ("下个礼拜去北京", end_of(2024, 3, 17)),
    ("I start the new job next week", end_of(2024, 3, 17)),
    ("下下周交论文", end_of(2024, 3, 24)),
    ("The audit is the week after next", end_of(2024, 3, 24)),
    # Evenings and mornings.
    ("We're having dinner with Sam tomorrow night", end_of(2024, 3, 7)),
    ("明晚和朋友吃饭", end_of(2024, 3, 7)),
    ("明晚八点和朋友吃饭", datetime(2024, 3, 7, 20, 0)),
    ("今晚7点看电影", datetime(2024, 3, 6, 19, 0)),
    ("明早六点半出发", datetime(2024, 3, 7, 6, 30)),
    ("Call the plumber this afternoon", end_of(2024, 3, 6)),
    # Months and years: their last day.
    ("月底前交房租", end_of(2024, 3, 31)),
    ("Pay the rent by the end of the month", end_of(2024, 3, 31)),
    ("下个月底搬家", end_of(2024, 4, 30)),
    ("下月底搬家", end_of(2024, 4, 30)),
    ("The lease ends at the end of next month", end_of(2024, 4, 30)),
    ("下个月去日本", end_of(2024, 4, 30)),
    ("下月去日本", end_of(2024, 4, 30)),
    ("We move next month", end_of(2024, 4, 30)),
    ("这个月要考驾照", end_of(2024, 3, 31)),
    ("本月完成装修", end_of(2024, 3, 31)),
    ("I want to read three books this month", end_of(2024, 3, 31)),
    ("下个月5号复诊", end_of(2024, 4, 5)),
    ("明年去留学", end_of(2025, 12, 31)),
    ("We plan to marry next year", end_of(2025, 12, 31)),
    # Spans from the anchor.
    ("三天以后出发", end_of(2024, 3, 9)),
    ("5天之后交货", end_of(2024, 3, 11)),
    ("过两天去看她", end_of(2024, 3, 8)),
    ("两个星期后考试", end_of(2024, 3, 20)),
    ("一个月后复查", end_of(2024, 4, 6)),
    ("一年后回国", end_of(2025, 3, 6)),
    ("The parcel arrives in a couple of days", end_of(2024, 3, 8)),
    ("We'll know in 10 days", end_of(2024, 3, 16)),
    ("I'll be back in a year", end_of(2025, 3, 6)),
    ("The visa comes three weeks from now", end_of(2024, 3, 27)),
    ("两个小时后开会", datetime(2024, 3, 6, 12, 0)),
    ("The train leaves in a couple of hours", datetime(2024, 3, 6, 12, 0)),
    # A day of a date followed by 以后 is after that date, not a span of days.
    ("3月5日以后再说", end_of(2025, 3, 5)),
    ("3月15日以后再说", end_of(2024, 3, 15)),
])
def test_plan_expressions_on_a_wednesday(text, due):
    assert deadline(text, WEDNESDAY) == due


@pytest.mark.parametrize("anchor, text, due", [
    (SATURDAY, "这个周末去爬山", end_of(2024, 3, 10)),
    (SATURDAY, "I'm going hiking this weekend", end_of(2024, 3, 10)),
    (SUNDAY, "这个周末去爬山", end_of(2024, 3, 10)),  # said on Sunday: today
    (SUNDAY, "下周末回老家", end_of(2024, 3, 17)),
    (SUNDAY, "next weekend", end_of(2024, 3, 17)),
    (SUNDAY, "下周去北京", end_of(2024, 3, 17)),
    (datetime(2024, 12, 20, 9, 0), "下个月底", end_of(2025, 1, 31)),  # across a year
    (datetime(2024, 1, 31, 9, 0), "end of next month", end_of(2024, 2, 29)),  # leap February
    (datetime(2024, 12, 20, 9, 0), "下个月10号", end_of(2025, 1, 10)),
])
def test_plan_expressions_near_boundaries(anchor, text, due):
    assert deadline(text, anchor) == due


@pytest.mark.parametrize("text", [
    "上周末去爬山了", "last weekend we went hiking", "每个周末都去跑步", "I run on weekends",
    "no time here", "上个周末很开心",
])
def test_past_and_habitual_weekends_are_no_deadline(text):
    assert deadline(text, WEDNESDAY) is None


@pytest.mark.parametrize("text, due", [  # what worked before keeps working
    ("明天去体检", end_of(2024, 3, 7)),
    ("下周三开会", end_of(2024, 3, 13)),
    ("We fly out next Friday", end_of(2024, 3, 15)),
    ("Let's meet in two weeks", end_of(2024, 3, 20)),
    ("in 2 hours", datetime(2024, 3, 6, 12, 0)),
    ("The review is on 12 April at 3:30 pm", datetime(2024, 4, 12, 15, 30)),
    ("年底前还清贷款", end_of(2024, 12, 31)),
])
def test_earlier_expressions_unchanged(text, due):
    assert deadline(text, WEDNESDAY) == due


@pytest.mark.parametrize("text, mention, saturday", [
    ("这个周末去爬山", "这个周末", datetime(2024, 3, 9)),
    ("下周末回老家", "下周末", datetime(2024, 3, 16)),
    ("下下周末搬家", "下下周末", datetime(2024, 3, 23)),
    ("上周末去爬山了", "上周末", datetime(2024, 3, 2)),
    ("上上个周末", "上上个周末", datetime(2024, 2, 24)),
])
def test_chinese_weekends_are_date_mentions(text, mention, saturday):
    """Named by their Saturday, like "this weekend"; no longer read as the week 下周 / 上周."""
    [found] = date_mentions(text, WEDNESDAY)
    assert (found.text, found.day, found.precision) == (mention, saturday, "weekend")


def test_a_weekend_label_reads_back_as_a_date_in_that_weekend():
    [found] = date_mentions("下周末回老家", WEDNESDAY)
    assert deadline(found.label(chinese=True), WEDNESDAY) == end_of(2024, 3, 16)
    assert deadline(found.label(), WEDNESDAY) == end_of(2024, 3, 16)


@pytest.mark.parametrize("anchor, text, due", [
    # A month named without a day: its last day, in its next occurrence or the year named.
    (WEDNESDAY, "明年三月去日本", end_of(2025, 3, 31)),  # not next year's end
    (WEDNESDAY, "明年3月去日本", end_of(2025, 3, 31)),
    (WEDNESDAY, "五月份搬家", end_of(2024, 5, 31)),
    (WEDNESDAY, "二月份搬家", end_of(2025, 2, 28)),  # February has passed: next year's
    (WEDNESDAY, "十二月底交论文", end_of(2024, 12, 31)),
    (WEDNESDAY, "We move in May", end_of(2024, 5, 31)),
    (WEDNESDAY, "We move in February", end_of(2025, 2, 28)),
    (WEDNESDAY, "next March we marry", end_of(2025, 3, 31)),
    (WEDNESDAY, "next April we marry", end_of(2024, 4, 30)),
    # A day of the month without its month: the next such day.
    (WEDNESDAY, "I have a dentist appointment on the 14th at 3pm", datetime(2024, 3, 14, 15, 0)),
    (WEDNESDAY, "the rent is due on the 5th", end_of(2024, 4, 5)),
    (datetime(2024, 1, 31, 9, 0), "call her on the 30th", end_of(2024, 3, 30)),  # no 30 February
    # A date without a year, said in December, is next January's.
    (datetime(2025, 12, 9, 10, 0), "Sam starts on January 5", end_of(2026, 1, 5)),
])
def test_months_and_days_named_alone(anchor, text, due):
    assert deadline(text, anchor) == due


@pytest.mark.parametrize("text", ["I may go later", "last May we met", "每月5号还款", "上个月去了",
                                  "三个月后复查 is a span, not March"])
def test_no_named_month_where_none_is_meant(text):
    due = deadline(text, WEDNESDAY)
    assert due is None or (due.month, due.day) == (6, 6)  # the span's own date, never a month's end


TUESDAY_IN_DECEMBER = datetime(2025, 12, 9, 16, 0)  # 13 December 2025 is a Saturday


@pytest.mark.parametrize("text, due", [
    # A date said without a year is its next occurrence.
    ("Sam starts on January 5", end_of(2026, 1, 5)),
    ("1月5日开始上新课", end_of(2026, 1, 5)),
    ("The play is on March 3rd", end_of(2026, 3, 3)),
    ("Caroline is taking Luna to the vet on Saturday", end_of(2025, 12, 13)),  # the coming one
    ("妈妈周六过来", end_of(2025, 12, 13)),
    ("Pay it by the end of the month", end_of(2025, 12, 31)),
    ("明年三月去日本", end_of(2026, 3, 31)),
    ("下周五开家长会", end_of(2025, 12, 19)),
    ("这个周末去动物园", end_of(2025, 12, 14)),
    ("后天下午三点复查", datetime(2025, 12, 11, 15, 0)),
    # A day of the month alone, English and Chinese: the next such day.
    ("on the 14th at 3pm", datetime(2025, 12, 14, 15, 0)),
    ("小王14号出差", end_of(2025, 12, 14)),
    ("3号下午三点交材料", datetime(2026, 1, 3, 15, 0)),  # the 3rd has passed: January's
    ("二十号开年会", end_of(2025, 12, 20)),
    # A clock time without a date already past when said: the next day's.
    ("Call mom at 3pm", datetime(2025, 12, 10, 15, 0)),
    ("下午三点开会", datetime(2025, 12, 10, 15, 0)),
    ("Call mom at 5pm", datetime(2025, 12, 9, 17, 0)),
    ("lunch at noon tomorrow", datetime(2025, 12, 10, 12, 0)),
    ("dinner at 8 tonight", datetime(2025, 12, 9, 20, 0)),
])
def test_dates_without_a_year_and_days_alone(text, due):
    assert deadline(text, TUESDAY_IN_DECEMBER) == due


@pytest.mark.parametrize("text", ["每月5号还款", "他住在14号楼", "坐地铁2号线", "I was at 5 stores"])
def test_numbers_that_are_not_days(text):
    assert deadline(text, TUESDAY_IN_DECEMBER) is None


# -- One parse read two ways: what the two former parsers disagreed on -------------------------


@pytest.mark.parametrize("text, due", [
    # A day already past tells when something happened, not when the plan is due.
    ("上周三约好下周五见面", end_of(2024, 3, 15)),
    ("Last Friday I said we'd go next week", end_of(2024, 3, 17)),
    ("last Saturday", None),
    ("上周六去了公园", None),
    ("I adopted a cat 3 days ago", None),
    ("上个月底搬的家", None),
    ("2024年3月1日交了房租", None),  # not rolled on to next year
    # Habits name no day.
    ("我每周三游泳", None),
    ("I swim every Tuesday", None),
    # Of two expressions of one kind, the later: the plan is valid until then.
    ("周三没空，周五去", end_of(2024, 3, 8)),
    ("I'll see you this Saturday or next Sunday", end_of(2024, 3, 17)),
    # A year said is the year meant.
    ("2025年3月去日本", end_of(2025, 3, 31)),
    ("We move in March 2025", end_of(2025, 3, 31)),
    ("明年底前还清", end_of(2025, 12, 31)),
    # Steps of two.
    ("下下个星期三复查", end_of(2024, 3, 20)),
    ("Next March we marry", end_of(2025, 3, 31)),
    # An impossible date does not hide the next one.
    ("on February 30th or March 1st", end_of(2025, 3, 1)),
])
def test_deadlines_read_from_the_shared_parse(text, due):
    assert deadline(text, WEDNESDAY) == due


@pytest.mark.parametrize("text, past, mentions", [
    # One expression where the year and the month were read apart.
    ("明年三月去日本", False, [("明年三月", datetime(2025, 3, 1), "month")]),
    ("去年三月去了日本", True, [("去年三月", datetime(2023, 3, 1), "month")]),
    # A date's day followed by 以后 is that date, not a span of days.
    ("3月15日以后再说", False, [("3月15日", datetime(2024, 3, 15), "day")]),
    # Spans of years are years; "a couple of" and "from now" are counts.
    ("I'll be back in 2 years", False, [("in 2 years", datetime(2026, 1, 1), "year")]),
    ("We met a couple of days ago", True, [("a couple of days ago", datetime(2024, 3, 4), "day")]),
    ("The visa comes three weeks from now", False, [("three weeks from now", datetime(2024, 3, 25), "week")]),
    # The whole expression, and the day where one is named.
    ("下个月5号复诊", False, [("下个月5号", datetime(2024, 4, 5), "day")]),
    ("The lease ends at the end of next month", False, [("end of next month", datetime(2024, 4, 1), "month")]),
    ("下下个礼拜交", False, [("下下个礼拜", datetime(2024, 3, 18), "week")]),
    # "next March" said in March is next year's; "last March" last year's.
    ("next March we marry", False, [("next March", datetime(2025, 3, 1), "month")]),
    ("last March we met", True, [("last March", datetime(2023, 3, 1), "month")]),
    # Not a month, and not a date: the verb; a vague 周末, the 14th and an hour count.
    ("this may take a while", True, []),
    ("周末去爬山，14号交报告，两个小时后开会", False, []),
])
def test_date_mentions_read_from_the_shared_parse(text, past, mentions):
    found = date_mentions(text, WEDNESDAY, past=past)
    assert [(m.text, m.day, m.precision) for m in found] == mentions


@pytest.mark.parametrize("text", ["下周三开会", "明年三月去日本", "下个月5号复诊", "next Friday",
                                  "in two weeks", "this weekend", "下下周", "the week after next"])
def test_a_plan_is_due_within_what_its_mention_names(text):
    """Both readings come from one parse: the deadline falls in the period the mention labels."""
    [mention] = date_mentions(text, WEDNESDAY)
    due = deadline(text, WEDNESDAY)
    assert mention.day <= due
    assert deadline(mention.label(), WEDNESDAY).date() >= mention.day.date()
