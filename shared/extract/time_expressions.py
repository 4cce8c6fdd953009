"""Time expressions in a text, Chinese and English, each resolved against an anchor (when the
text was said) to what it names: its first day, the day a plan on it falls due, its precision.

明天, 后天, 昨天, 下周三, 上周六, 周五, 这个周末, 下下周, 上个月, 下个月底, 月底, 明年, 去年三月,
五月份, 3月5日, 下个月5号, 14号, 两天后, 三天前, 过两天, 两个小时后; tomorrow, yesterday, next
Friday, last weekend, the week after next, end of next month, in May, March 5 / 5 March 2023,
the 14th, on 1/15, 1/15号, in two weeks, 3 days ago, a couple of days from now, in 3 hours.

A week, weekend, month or year is due on its last day (a plan is valid until then) and named by
its first; a span ("in two weeks") is due on its own day and named by the period it falls in.
`past` says how to read what could go either way (a bare "Friday", "in May", "3月5日"): the last
one before the anchor, for an event told, or the next one, for a plan. Days are counted on
the anchor's clock, and every time found carries the anchor's tzinfo. The words are in
time_words.py, the calendar arithmetic in time_calendar.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import MAXYEAR, MINYEAR, datetime, timedelta, timezone

from shared.extract.time_calendar import (
    exact_date,
    midnight,
    nearest_date,
    nearest_weekday,
    next_day_of_month,
    period,
    shift,
    year_of_month,
)
from shared.extract.time_words import (
    DAY_WORD,
    DAY_WORDS,
    EN_COUNT,
    EN_MONTH,
    EN_MONTH_NAME,
    EN_MONTHS,
    EN_STEPS,
    EN_UNIT,
    EN_WEEKDAYS,
    ZH_COUNT,
    ZH_DAY_NUMBER,
    ZH_NUMERAL,
    ZH_STEP,
    ZH_STEPS,
    ZH_UNIT,
    ZH_UNITS,
    ZH_WEEK_WORD,
    ZH_WEEKDAY,
    ZH_WEEKDAYS,
    ZH_YEAR_STEPS,
    en_number,
    zh_number,
)

# The kinds of expression, in the order a plan's deadline prefers them (the more precise first:
# 下周三 over 下周, 月底 over 下周). Where two expressions overlap the earlier kind is kept (下周三
# is a day, not the week 下周; "end of next month" is a month's end, not "next month").
KINDS = ("hours", "span", "date", "weekday", "weekend", "day", "day_of_month", "named_month",
         "month_end", "year_end", "week", "month", "year")


@dataclass(frozen=True)
class TimeExpression:
    start: int
    end: int
    kind: str
    first: datetime  # midnight of the first day it names (an hour count: the moment itself)
    due: datetime    # when a plan on it falls due: its last day's midnight, or the moment
    precision: str   # "moment" | "day" | "weekend" | "week" | "month" | "year"
    # Says not which one (周末, the 14th, 月底) or names a moment: read as a plan's coming one,
    # never as the date of an event told.
    plan_only: bool = False


# The most years a word steps from its anchor (后年, 大后天 and the rest stay well within it).
_LONGEST_STEP_YEARS = 3


def resolvable(anchor: datetime) -> bool:
    """Whether expressions can be resolved against `anchor`: not so near the calendar's ends
    (years 1 and 9999) that a step from it (明年, the day after tomorrow) would fall off. Only
    a memory stored before its time was checked has such an anchor."""
    return MINYEAR + _LONGEST_STEP_YEARS <= anchor.year <= MAXYEAR - _LONGEST_STEP_YEARS


def find_expressions(text: str, anchor: datetime, past: bool = False) -> list[TimeExpression]:
    """The time expressions of `text` in the order they are written; where two overlap, the one
    of the earlier kind (KINDS), else the earlier in the text. None against an anchor that is
    not resolvable(); a count that leaves the calendar ("in 9000 years") names no date."""
    if not resolvable(anchor):
        return []
    found = [e for finder in _FINDERS for e in finder(text, anchor, past)]
    kept: list[TimeExpression] = []
    for e in sorted(found, key=lambda e: (KINDS.index(e.kind), e.start)):
        if all(e.end <= k.start or e.start >= k.end for k in kept):
            kept.append(e)
    return sorted(kept, key=lambda e: e.start)


def _found(m: re.Match, kind: str, first: datetime, due: datetime, precision: str = "day",
           plan_only: bool = False) -> TimeExpression:
    return TimeExpression(m.start(), m.end(), kind, first, due, precision, plan_only)


# -- Counts from now ------------------------------------------------------------------------------

_EN_HOURS = re.compile(rf"\bin\s+{EN_COUNT}\s+hours?\b", re.I)
_ZH_HOURS = re.compile(ZH_COUNT + r"\s*个?(?:小时|钟头)(?:以后|之后|后)")
# Not the day of a date: 3月5日以后 is after March 5, not five days from now.
_SPANS = (  # (pattern, how its count is read)
    (re.compile(rf"(?<![月\d{ZH_NUMERAL}])(?P<n>{ZH_COUNT})\s*(?P<unit>{ZH_UNIT})(?P<way>以后|之后|后|以前|之前|前)"),
     zh_number),
    (re.compile(rf"过(?P<n>{ZH_COUNT})\s*(?P<unit>{ZH_UNIT})(?P<way>)"), zh_number),
    (re.compile(rf"\bin\s+(?P<n>{EN_COUNT})\s+(?P<unit>{EN_UNIT})s?\b(?P<way>)", re.I), en_number),
    (re.compile(rf"\b(?P<n>{EN_COUNT})\s+(?P<unit>{EN_UNIT})s?\s+(?P<way>from\s+now|ago)\b", re.I), en_number),
)


def _hour_counts(text: str, anchor: datetime, past: bool) -> Iterator[TimeExpression]:
    """in 3 hours, 两个小时后: that moment, not the end of a day."""
    counts = [(m, en_number(m.group(1))) for m in _EN_HOURS.finditer(text)]
    counts += [(m, zh_number(m.group(1))) for m in _ZH_HOURS.finditer(text)]
    for m, n in counts:
        if n is not None and (moment := _counted(lambda n=n: later(anchor, timedelta(hours=n)))):
            yield _found(m, "hours", moment, moment, "moment", plan_only=True)


def later(anchor: datetime, elapsed: timedelta) -> datetime:
    """The moment `elapsed` after the anchor, on the anchor's clock: counted in real time (an
    hour across a DST change is an hour), where a day's arithmetic goes by the calendar."""
    if anchor.tzinfo is None:
        return anchor + elapsed
    return (anchor.astimezone(timezone.utc) + elapsed).astimezone(anchor.tzinfo)


def _spans(text: str, anchor: datetime, past: bool) -> Iterator[TimeExpression]:
    """in N days / weeks / months / years, N ... from now, N ... ago; 三天后, 过两天, 两个月前:
    due on that day, named by the week, month or year it falls in."""
    for pattern, number in _SPANS:
        for m in pattern.finditer(text):
            n = number(m.group("n"))
            if n is None:
                continue
            unit = ZH_UNITS.get(m.group("unit")) or m.group("unit").lower()
            ago = m.group("way").endswith("前") or m.group("way").lower() == "ago"
            day = _counted(lambda n=n, ago=ago, unit=unit: shift(midnight(anchor), -n if ago else n, unit))
            if day is not None:
                yield _found(m, "span", period(day, unit)[0], day, unit)


def _counted(moment) -> datetime | None:
    """The moment a count from the anchor names, or None when the count leaves the calendar
    (a year after 9999 is a ValueError, a day an OverflowError)."""
    try:
        return moment()
    except (OverflowError, ValueError):
        return None


# -- Days ------------------------------------------------------------------------------------------

_ZH_DATE = re.compile(rf"(?:(\d{{4}})年)?{ZH_DAY_NUMBER}月{ZH_DAY_NUMBER}[日号]")
_ZH_DATE_OF_STEP = re.compile(rf"{ZH_STEP}月{ZH_DAY_NUMBER}[日号]")  # 下个月5号
_EN_YEAR = r"(?:,?\s*(\d{4}))?"
_EN_MONTH_DAY = re.compile(rf"\b{EN_MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b{_EN_YEAR}", re.I)
_EN_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{EN_MONTH}\b{_EN_YEAR}", re.I)
# 1/15, 15/1, 1/15/2026 after a word that makes it a date (on, by, until, 于, 在) or before 号/日: a
# fraction, a score or 24/7 has none. Month first, unless the first number cannot be a month.
_SLASH_DATE = re.compile(r"(?:\b(?:on|by|until|till|before|after|from|due|since)\s+|(?<=[于在到截至]))"
                         r"(?P<a>\d{1,2})/(?P<b>\d{1,2})(?:/(?P<year>\d{4}))?(?![\d/])"
                         r"|(?<![\d/.])(?P<a2>\d{1,2})/(?P<b2>\d{1,2})(?=[号日])", re.I)
_ZH_WEEKDAY = re.compile(rf"(?<![每个])(?:{ZH_STEP})?{ZH_WEEK_WORD}{ZH_WEEKDAY}")  # not 每周三
_EN_WEEKDAY = re.compile(  # not every Friday
    rf"\b(?<!every )(?<!each )(?:(last|next|this|on|coming|past)\s+)?({'|'.join(EN_WEEKDAYS)})\b", re.I)
_DAY_WORD = re.compile(DAY_WORD, re.I)
# 14号 / 3号 alone: not a date's day (3月5号, 下个月5号), not 每月5号, not a building, line or room.
_ZH_DAY_ALONE = re.compile(rf"(?<![月\d{ZH_NUMERAL}])(\d{{1,2}}|[{ZH_NUMERAL}]{{1,3}})号(?![楼线房床门口位])")
_EN_DAY_ALONE = re.compile(rf"\bthe\s+(\d{{1,2}})(?:st|nd|rd|th)\b(?!\s+(?:of\s+)?(?:{EN_MONTH_NAME}))", re.I)


def _dates(text: str, anchor: datetime, past: bool) -> Iterator[TimeExpression]:
    """3月5日, 2023年5月12日, 下个月5号, March 5 / 5 March / the 5th of March (, 2023), on 3/5:
    in the year said, or the next (a plan) or last (past) such day."""
    today = midnight(anchor)
    said = [(m, m.group(1), zh_number(m.group(2)), zh_number(m.group(3))) for m in _ZH_DATE.finditer(text)]
    said += [(m, m.group(3), EN_MONTHS[m.group(1).lower()], int(m.group(2))) for m in _EN_MONTH_DAY.finditer(text)]
    said += [(m, m.group(3), EN_MONTHS[m.group(2).lower()], int(m.group(1))) for m in _EN_DAY_MONTH.finditer(text)]
    said += [(m, m.group("year"), *_slash_month_day(m)) for m in _SLASH_DATE.finditer(text)]
    for m, year, month, day in said:
        found = exact_date(int(year), month, day, today.tzinfo) if year else nearest_date(today, month, day, past)
        if found is not None:
            yield _found(m, "date", found, found)
    for m in _ZH_DATE_OF_STEP.finditer(text):
        month = shift(today.replace(day=1), ZH_STEPS[m.group(1)], "month")
        if (found := exact_date(month.year, month.month, zh_number(m.group(2)), today.tzinfo)) is not None:
            yield _found(m, "date", found, found)


def _slash_month_day(m: re.Match) -> tuple[int, int]:
    """(month, day) of 1/15 (month first) or 15/1 (a first number over 12 is the day)."""
    a, b = int(m.group("a") or m.group("a2")), int(m.group("b") or m.group("b2"))
    return (b, a) if a > 12 >= b else (a, b)


def _weekdays(text: str, anchor: datetime, past: bool) -> Iterator[TimeExpression]:
    """下周三, 上周六, 这个星期五, 周五; next / last / this / coming Friday, on Friday. Not
    每周三, every Friday (habits, not a day)."""
    today = midnight(anchor)
    monday = today - timedelta(days=today.weekday())
    for m in _ZH_WEEKDAY.finditer(text):
        target = ZH_WEEKDAYS[m.group(2)]
        day = nearest_weekday(today, target, past) if m.group(1) is None \
            else monday + timedelta(weeks=ZH_STEPS[m.group(1)], days=target)
        yield _found(m, "weekday", day, day)
    for m in _EN_WEEKDAY.finditer(text):
        word, target = (m.group(1) or "").lower(), EN_WEEKDAYS[m.group(2).lower()]
        if word == "next":  # like 下周X: that day of next week
            day = monday + timedelta(weeks=1, days=target)
        else:
            day = nearest_weekday(today, target, {"last": True, "past": True, "coming": False}.get(word, past))
        yield _found(m, "weekday", day, day)


def _day_words(text: str, anchor: datetime, past: bool) -> Iterator[TimeExpression]:
    """明天, 昨晚, 大后天; tomorrow, last night, the day after tomorrow."""
    for m in _DAY_WORD.finditer(text):
        day = midnight(anchor) + timedelta(days=DAY_WORDS[m.group(0).lower()])
        yield _found(m, "day", day, day)


def _days_of_month(text: str, anchor: datetime, past: bool) -> Iterator[TimeExpression]:
    """"on the 14th", 14号 (a plan's): the next 14th, today counting."""
    for m in (*_EN_DAY_ALONE.finditer(text), *_ZH_DAY_ALONE.finditer(text)):
        number = zh_number(m.group(1))
        if number and 1 <= number <= 31 and (day := next_day_of_month(midnight(anchor), number)):
            yield _found(m, "day_of_month", day, day, plan_only=True)


# -- Weeks, months, years --------------------------------------------------------------------------

_ZH_WEEKEND = re.compile(rf"(?<![每个])(?:{ZH_STEP})?周末")
_EN_WEEKEND = re.compile(r"\b(last|past|this|the|coming|upcoming|next)\s+weekend\b(?!\s+of\b)", re.I)
_ZH_MONTH = re.compile(rf"(?:(\d{{4}}|[{''.join(ZH_YEAR_STEPS)}])年)?(?<![\d{ZH_NUMERAL}个每上]){ZH_DAY_NUMBER}月"
                       rf"(?:份|底|末|初|中)?(?![\d{ZH_NUMERAL}]*[日号])")
_EN_MONTH_ALONE = re.compile(
    rf"\b(?:(last|next|this|in|since|during|until|by|every)\s+)?{EN_MONTH}\b(?:\s+(\d{{4}}))?(?!\s+\d)", re.I)
_MONTH_NAMES = set(EN_MONTH_NAME.split("|"))
_EN_MONTH_READING = {"last": "before", "since": "past", "next": "after", "until": "next", "by": "next"}
_ZH_WEEK = re.compile(rf"{ZH_STEP}{ZH_WEEK_WORD}(?!{ZH_WEEKDAY})")
_ZH_MONTH_OF_STEP = re.compile(rf"(?:{ZH_STEP})?月([底末])?")
_ZH_YEAR = re.compile(rf"([{''.join(ZH_YEAR_STEPS)}])?年([底末])?")
_EN_PERIOD = re.compile(r"\b(last|past|this|next)\s+(week|month|year)\b", re.I)
_EN_WEEK_AFTER_NEXT = re.compile(r"\bweek after next\b", re.I)
_EN_PERIOD_END = re.compile(r"\bend of (the|this|next|last)\s+(week|month|year)\b", re.I)


def _weekends(text: str, anchor: datetime, past: bool) -> Iterator[TimeExpression]:
    """这个周末, 下周末, 上上个周末; this / next / last / coming weekend: Saturday to Sunday.
    A bare 周末 or "the weekend" is the coming one for a plan, and may be a habit otherwise.
    Not 每个周末, 两个周末; "the weekend of 6 May" is read by its date."""
    weekends = [(m, ZH_STEPS.get(m.group(1), 0), m.group(1) is None) for m in _ZH_WEEKEND.finditer(text)]
    weekends += [(m, EN_STEPS[m.group(1).lower()], m.group(1).lower() == "the") for m in _EN_WEEKEND.finditer(text)]
    for m, weeks, plan_only in weekends:
        saturday, sunday = period(midnight(anchor) + timedelta(weeks=weeks), "weekend")
        yield _found(m, "weekend", saturday, sunday, "weekend", plan_only)


def _zh_named_months(text: str, anchor: datetime, past: bool) -> Iterator[TimeExpression]:
    """A month named without a day: 五月份, 十二月底, 明年三月, 2024年3月. Not 三个月, 每月."""
    for m in _ZH_MONTH.finditer(text):
        said, year = m.group(1), None
        if said:  # 2024年 or 明年
            year = int(said) if said.isdigit() else anchor.year + ZH_YEAR_STEPS[said]
        # 5月10 may be a date said without 日: a plan's month, not a month to label
        number_follows = re.match(rf"[\d{ZH_NUMERAL}]", text[m.end():]) is not None
        yield from _month(m, anchor, zh_number(m.group(2)), year, "past" if past else "next", number_follows)


def _en_named_months(text: str, anchor: datetime, past: bool) -> Iterator[TimeExpression]:
    """in / by / since / next / last May, March 2024, and a bare March (a plan's). Not every
    March, "this may take"."""
    for m in _EN_MONTH_ALONE.finditer(text):
        word, name, year = (m.group(1) or "").lower(), m.group(2), m.group(3)
        bare = not word and not year
        if word == "every" or (word == "this" and name == "may") or (bare and name not in _MONTH_NAMES):
            continue  # a habit; the verb; a month without a word before it is read capitalised and in full
        reading = _EN_MONTH_READING.get(word, "past" if past else "next")
        yield from _month(m, anchor, EN_MONTHS[name.lower()], int(year) if year else None, reading, bare)


def _month(m: re.Match, anchor: datetime, month: int | None, year: int | None, reading: str,
           plan_only: bool) -> Iterator[TimeExpression]:
    """The month named, in the year said, else by `reading` (time_calendar.year_of_month)."""
    if month and 1 <= month <= 12 and (year is None or MINYEAR <= year <= MAXYEAR):
        first_day = datetime(year or year_of_month(anchor, month, reading), month, 1, tzinfo=anchor.tzinfo)
        first, last = period(first_day, "month")
        yield _found(m, "named_month", first, last, "month", plan_only)


def _zh_periods(text: str, anchor: datetime, past: bool) -> Iterator[TimeExpression]:
    """下下周, 上个礼拜, 下个月, 下个月底, 月底, 去年, 明年底, 年底: a bare 月底 or 年底 is the
    anchor's (a plan's)."""
    for m in _ZH_WEEK.finditer(text):
        yield _period_from(m, anchor, ZH_STEPS[m.group(1)], "week")
    for m in _ZH_MONTH_OF_STEP.finditer(text):
        step, end = m.group(1), m.group(2)
        if (step or end) and m.group(0) != "这月":  # 这月亮 is the moon; 这个月, 这月底 are months
            yield _period_from(m, anchor, ZH_STEPS.get(step, 0), "month", bool(end), plan_only=not step)
    for m in _ZH_YEAR.finditer(text):
        step, end = m.group(1), m.group(2)
        if step or end:
            yield _period_from(m, anchor, ZH_YEAR_STEPS.get(step, 0), "year", bool(end), plan_only=not step)


def _en_periods(text: str, anchor: datetime, past: bool) -> Iterator[TimeExpression]:
    """last / this / next week, month, year; the week after next; the end of the / this / next
    month (the end of "the" month is the anchor's, a plan's)."""
    for m in _EN_PERIOD.finditer(text):
        yield _period_from(m, anchor, EN_STEPS[m.group(1).lower()], m.group(2).lower())
    for m in _EN_WEEK_AFTER_NEXT.finditer(text):
        yield _period_from(m, anchor, 2, "week")
    for m in _EN_PERIOD_END.finditer(text):
        word = m.group(1).lower()
        yield _period_from(m, anchor, EN_STEPS[word], m.group(2).lower(), True, plan_only=word == "the")


def _period_from(m: re.Match, anchor: datetime, steps: int, unit: str, end: bool = False,
                 plan_only: bool = False) -> TimeExpression:
    """The week, month or year `steps` from the anchor's. The end of a month or year is a kind of
    its own, preferred for a deadline to a week (月底 over 下周); a week's end is the week."""
    first, last = period(shift(midnight(anchor), steps, unit), unit)
    return _found(m, f"{unit}_end" if end and unit != "week" else unit, first, last, unit, plan_only)


_FINDERS = (_hour_counts, _spans, _dates, _weekdays, _weekends, _day_words, _days_of_month,
            _zh_named_months, _en_named_months, _zh_periods, _en_periods)
