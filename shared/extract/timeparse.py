"""Time expressions, Chinese and English, resolved to a deadline relative to an anchor time.

Handles what people say about plans: 明天, 后天, 大后天, 下周三, 周五, 月底, 年底, 3月5日,
下午五点, 两天后, 三周后; tomorrow, day after tomorrow, next Friday, on March 5 / 5 March,
in two weeks, end of the month, at 5pm. A date without a clock time means the end of that
day; a clock time without a date means that time on the anchor's day (or the resolved day).
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta

_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9, "十": 10, "半": 0}
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
               "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_EN_WEEKDAY = {d.lower(): i for i, d in enumerate(calendar.day_name)}
_EN_MONTH = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_EN_MONTH.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})


def zh_number(text: str) -> int | None:
    """'3' / '十二' / '二十五' / '两' -> int."""
    if text.isdigit():
        return int(text)
    if not text or any(c not in _ZH_DIGITS for c in text):
        return None
    if "十" not in text:
        value = 0
        for c in text:
            value = value * 10 + _ZH_DIGITS[c]
        return value
    tens, _, ones = text.partition("十")
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[ones] if ones else 0)


def _end_of_day(day: datetime) -> datetime:
    return day.replace(hour=23, minute=59, second=59, microsecond=0)


def _day_offset(text: str, anchor: datetime) -> datetime | None:
    lowered = text.lower()
    for word, days in (("大后天", 3), ("后天", 2), ("明天", 1), ("今天", 0), ("今晚", 0),
                       ("day after tomorrow", 2), ("tomorrow", 1), ("tonight", 0), ("today", 0)):
        if word in lowered:
            return anchor + timedelta(days=days)
    return None


def _relative_span(text: str, anchor: datetime) -> datetime | None:
    m = re.search(r"([一二两三四五六七八九十\d]+)\s*(天|日|周|星期|个月|月)后", text)
    if m and (n := zh_number(m.group(1))) is not None:
        unit = m.group(2)
        return _add(anchor, n, "day" if unit in ("天", "日") else "week" if unit in ("周", "星期") else "month")
    m = re.search(r"\bin\s+(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s+"
                  r"(day|week|month|hour)s?\b", text, re.I)
    if m:
        n = int(m.group(1)) if m.group(1).isdigit() else _EN_NUMBERS[m.group(1).lower()]
        return _add(anchor, n, m.group(2).lower())
    return None


def _add(anchor: datetime, n: int, unit: str) -> datetime:
    if unit == "hour":
        return anchor + timedelta(hours=n)
    if unit == "week":
        return anchor + timedelta(weeks=n)
    if unit == "month":
        month = anchor.month - 1 + n
        year, month = anchor.year + month // 12, month % 12 + 1
        return anchor.replace(year=year, month=month, day=min(anchor.day, calendar.monthrange(year, month)[1]))
    return anchor + timedelta(days=n)


def _weekday(text: str, anchor: datetime) -> datetime | None:
    m = re.search(r"(下下|下个?|这个?|本)?(?:周|星期|礼拜)([一二三四五六日天])", text)
    if m:
        target, prefix = _ZH_WEEKDAY[m.group(2)], m.group(1) or ""
        monday = anchor - timedelta(days=anchor.weekday())
        weeks = 2 if prefix == "下下" else 1 if prefix.startswith("下") else 0
        day = monday + timedelta(weeks=weeks, days=target)
        if not prefix and day.date() < anchor.date():
            day += timedelta(weeks=1)
        return day
    m = re.search(r"\b(next|this|on|coming)?\s*(" + "|".join(_EN_WEEKDAY) + r")\b", text, re.I)
    if m:
        target = _EN_WEEKDAY[m.group(2).lower()]
        if (m.group(1) or "").lower() == "next":  # like 下周X: that day of next week
            monday = anchor - timedelta(days=anchor.weekday())
            return monday + timedelta(weeks=1, days=target)
        return anchor + timedelta(days=(target - anchor.weekday()) % 7)
    return None


def _calendar_date(text: str, anchor: datetime) -> datetime | None:
    m = re.search(r"(?:(\d{4})年)?(\d{1,2}|[一二三四五六七八九十]+)月(\d{1,2}|[一二三四五六七八九十]+)[日号]", text)
    if m:
        month, day = zh_number(m.group(2)), zh_number(m.group(3))
        return _future_date(anchor, int(m.group(1)) if m.group(1) else None, month, day)
    months = "|".join(sorted(_EN_MONTH, key=len, reverse=True))
    m = re.search(rf"\b({months})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b", text, re.I) or \
        re.search(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({months})\b", text, re.I)
    if m:
        a, b = m.group(1), m.group(2)
        month, day = (_EN_MONTH[a.lower()], int(b)) if not a.isdigit() else (_EN_MONTH[b.lower()], int(a))
        return _future_date(anchor, None, month, day)
    return None


def _future_date(anchor: datetime, year: int | None, month: int | None, day: int | None) -> datetime | None:
    if not month or not day or not 1 <= month <= 12:
        return None
    year = year or anchor.year
    try:
        date = anchor.replace(year=year, month=month, day=day)
    except ValueError:
        return None
    if date.date() < anchor.date():  # a date already past this year: the next one
        try:
            date = date.replace(year=date.year + 1)
        except ValueError:
            return None
    return date


def _period_end(text: str, anchor: datetime) -> datetime | None:
    if re.search(r"(月底|月末)|\bend of (the|this) month\b", text, re.I):
        return anchor.replace(day=calendar.monthrange(anchor.year, anchor.month)[1])
    if re.search(r"(年底|年末)|\bend of (the|this) year\b", text, re.I):
        return anchor.replace(month=12, day=31)
    if re.search(r"(下周|下星期|下个星期)(?![一二三四五六日天])|\bnext week\b", text, re.I):
        return anchor + timedelta(days=13 - anchor.weekday())
    if re.search(r"下个月|\bnext month\b", text, re.I):
        nxt = _add(anchor.replace(day=1), 1, "month")
        return nxt.replace(day=calendar.monthrange(nxt.year, nxt.month)[1])
    return None


def _clock(text: str) -> tuple[int, int] | None:
    m = re.search(r"(上午|早上|中午|下午|傍晚|晚上|凌晨)?\s*(\d{1,2}|[一二两三四五六七八九十]+)\s*[点點时](半|(\d{1,2})分?)?", text)
    if m:
        hour = zh_number(m.group(2))
        if hour is None or hour > 24:
            return None
        if m.group(1) in ("下午", "傍晚", "晚上") and hour < 12:
            hour += 12
        minute = 30 if m.group(3) == "半" else int(m.group(4)) if m.group(4) else 0
        return hour % 24, minute
    m = re.search(r"\b(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)", text, re.I) or \
        re.search(r"\bat\s+(\d{1,2}):(\d{2})\b()", text, re.I)
    if m:
        hour, minute = int(m.group(1)), int(m.group(2) or 0)
        suffix = (m.group(3) or "").lower().replace(".", "")
        if suffix == "pm" and hour < 12:
            hour += 12
        if suffix == "am" and hour == 12:
            hour = 0
        if hour < 24 and minute < 60:
            return hour, minute
    return None


def deadline(text: str, anchor: datetime) -> datetime | None:
    """When a plan in `text` falls due, relative to `anchor` (the memory's original time)."""
    day = (_relative_span(text, anchor) or _calendar_date(text, anchor) or _weekday(text, anchor)
           or _day_offset(text, anchor) or _period_end(text, anchor))
    clock = _clock(text)
    if day is None and clock is None:
        return None
    if clock is None:
        if re.search(r"\bin\s+\S+\s+hours?\b", text, re.I):
            return day
        return _end_of_day(day)
    base = day or anchor
    return base.replace(hour=clock[0], minute=clock[1], second=0, microsecond=0)
