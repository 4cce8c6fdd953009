"""Time expressions, Chinese and English, resolved to a deadline relative to an anchor time.

Handles what people say about plans: 明天, 明晚, 后天, 大后天, 下周三, 周五, 这个周末, 下周末,
这周, 下周, 下下周, 月底, 下个月底, 下个月, 下个月5号, 年底, 明年, 3月5日, 今晚八点, 下午五点,
两天后, 三天以后, 过两天, 两个星期后, 两个小时后; tomorrow (night), this evening, day after
tomorrow, next Friday, this / next weekend, this / next week, the week after next, end of the
(next) month, next month, next year, on March 5 / 5 March, in two weeks, in a couple of days,
in 3 hours, at 5pm. A date without a clock time means the end of that day, a week, weekend,
month or year its last day: a plan is valid until then, so the later reading of a vague
expression is the safer one. A clock time without a date means that time on the anchor's day.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9, "十": 10, "半": 0}
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
               "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_EN_WEEKDAY = {d.lower(): i for i, d in enumerate(calendar.day_name)}
_EN_MONTH = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_EN_MONTH.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
_ZH_COUNT = r"([一二两三四五六七八九十\d]+)"
# A count in words or digits; "a couple of" is two.
_EN_N = r"(\d+|a couple of|couple of|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_ZH_UNIT = {"天": "day", "日": "day", "周": "week", "星期": "week", "个星期": "week", "礼拜": "week",
            "个礼拜": "week", "个月": "month", "月": "month", "年": "year"}


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


def _en_number(word: str) -> int:
    return int(word) if word.isdigit() else 2 if "couple" in word.lower() else _EN_NUMBERS[word.lower()]


def _end_of_day(day: datetime) -> datetime:
    return day.replace(hour=23, minute=59, second=59, microsecond=0)


def _day_offset(text: str, anchor: datetime) -> datetime | None:
    lowered = text.lower()
    for word, days in (("大后天", 3), ("后天", 2), ("明天", 1), ("明晚", 1), ("明早", 1), ("今天", 0),
                       ("今晚", 0), ("day after tomorrow", 2), ("tomorrow", 1), ("tonight", 0),
                       ("today", 0), ("this morning", 0), ("this afternoon", 0), ("this evening", 0)):
        if word in lowered:
            return anchor + timedelta(days=days)
    return None


def _hours_ahead(text: str, anchor: datetime) -> datetime | None:
    """in 3 hours, 两个小时后: that moment, not the end of a day."""
    m = re.search(rf"\bin\s+{_EN_N}\s+hours?\b", text, re.I)
    if m:
        return anchor + timedelta(hours=_en_number(m.group(1)))
    m = re.search(_ZH_COUNT + r"\s*个?(?:小时|钟头)(?:以后|之后|后)", text)
    if m and (n := zh_number(m.group(1))) is not None:
        return anchor + timedelta(hours=n)
    return None


def _relative_span(text: str, anchor: datetime) -> datetime | None:
    # Not a day of a date ("3月5日以后" is after March 5, not five days from now).
    m = re.search(r"(?<![月\d一二三四五六七八九十])" + _ZH_COUNT +
                  r"\s*(个星期|个礼拜|个月|星期|礼拜|天|日|周|月|年)(?:以后|之后|后)", text) or \
        re.search(r"过" + _ZH_COUNT + r"\s*(个星期|个礼拜|个月|星期|礼拜|天|周|年)", text)
    if m and (n := zh_number(m.group(1))) is not None:
        return _shift(anchor, n, _ZH_UNIT[m.group(2)])
    m = re.search(rf"\bin\s+{_EN_N}\s+(day|week|month|year)s?\b", text, re.I) or \
        re.search(rf"\b{_EN_N}\s+(day|week|month|year)s?\s+from\s+now\b", text, re.I)
    if m:
        return _shift(anchor, _en_number(m.group(1)), m.group(2).lower())
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


def _weekend(text: str, anchor: datetime) -> datetime | None:
    """这个周末 / 周末 / 下周末 / 下下周末, this / the / coming / next weekend: its Sunday.
    Not 上周末, 每个周末, last weekend, weekends (past or habits, not plans)."""
    m = re.search(r"(?<![上每个])(下下个?|下个?|这个?|本)?周末", text)
    if m:
        prefix = m.group(1) or ""
        weeks = 2 if prefix.startswith("下下") else 1 if prefix.startswith("下") else 0
    else:
        m = re.search(r"\b(this|the|coming|upcoming|next)\s+weekend\b", text, re.I)
        if m is None:
            return None
        weeks = 1 if m.group(1).lower() == "next" else 0  # like 下周末: next week's weekend
    return anchor + timedelta(weeks=weeks, days=6 - anchor.weekday())


def _calendar_date(text: str, anchor: datetime) -> datetime | None:
    m = re.search(r"(?:(\d{4})年)?(\d{1,2}|[一二三四五六七八九十]+)月(\d{1,2}|[一二三四五六七八九十]+)[日号]", text)
    if m:
        month, day = zh_number(m.group(2)), zh_number(m.group(3))
        return _future_date(anchor, int(m.group(1)) if m.group(1) else None, month, day)
    m = re.search(r"(下个?|这个?|本)月(\d{1,2}|[一二三四五六七八九十]+)[日号]", text)
    if m:  # 下个月5号: that day of next month
        month = _add(anchor.replace(day=1), 1 if m.group(1).startswith("下") else 0, "month")
        return _exact(month.year, month.month, zh_number(m.group(2)))
    months = "|".join(sorted(_EN_MONTH, key=len, reverse=True))
    m = re.search(rf"\b({months})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b", text, re.I) or \
        re.search(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({months})\b", text, re.I)
    if m:
        a, b = m.group(1), m.group(2)
        month, day = (_EN_MONTH[a.lower()], int(b)) if not a.isdigit() else (_EN_MONTH[b.lower()], int(a))
        return _future_date(anchor, None, month, day)
    return None


_MONTH_NAMES = "|".join(m for m in calendar.month_name if m)  # capitalised: "may" is a verb


def _named_month(text: str, anchor: datetime) -> datetime | None:
    """A month named without a day: its last day, in its next occurrence (the current month
    counts), or in the year 明年 / 今年 / 后年 / "next" names. 明年三月 is March of next year,
    not next year's end; "in March", "by April", 五月份, 十二月底."""
    m = re.search(r"(明年|今年|后年)?(\d{1,2}|[一二三四五六七八九十]+)月(份|底|末|初|中)?(?![\d一二三四五六七八九十]*[日号])",
                  text)
    if m and not re.search(r"[个每上]$", text[:m.start(2)]):
        month = zh_number(m.group(2))
        years_ahead = {"明年": 1, "后年": 2, "今年": 0}.get(m.group(1) or "")
        return _last_day_of_month(anchor, month, years_ahead)
    m = re.search(rf"\b(next\s+|this\s+)?({_MONTH_NAMES})\b(?!\s+\d)", text)
    if m and not re.search(r"\b(last|every)\s+$", text[:m.start(2)], re.I):
        month = _EN_MONTH[m.group(2).lower()]
        after = (m.group(1) or "").strip().lower() == "next" and month <= anchor.month
        return _last_day_of_month(anchor, month, 1 if after else None)
    return None


def _last_day_of_month(anchor: datetime, month: int | None, years_ahead: int | None) -> datetime | None:
    """The last day of `month`, years_ahead years on, or (None) its next occurrence."""
    if not month or not 1 <= month <= 12:
        return None
    if years_ahead is None:
        years_ahead = 0 if month >= anchor.month else 1
    year = anchor.year + years_ahead
    return anchor.replace(year=year, month=month, day=calendar.monthrange(year, month)[1])


# 14号 / 3号 alone: not a date's day (3月5号, 下个月5号), not 每月5号, not a building, line or room.
_ZH_DAY_ALONE = re.compile(r"(?<![月\d一二三四五六七八九十])(\d{1,2}|[一二三四五六七八九十]{1,3})号(?![楼线房床门口位])")


def _ordinal_day(text: str, anchor: datetime) -> datetime | None:
    """"on the 14th", 14号: the next 14th (today counts)."""
    m = re.search(r"\bthe\s+(\d{1,2})(?:st|nd|rd|th)\b(?!\s+(?:of\s+)?(?:" + _MONTH_NAMES + r"))", text, re.I) \
        or _ZH_DAY_ALONE.search(text)
    day = zh_number(m.group(1)) if m else None
    if not day or not 1 <= day <= 31:
        return None
    month = anchor.replace(day=1)
    for _ in range(3):  # the 31st may skip a month or two
        if day <= calendar.monthrange(month.year, month.month)[1]:
            found = month.replace(day=day)
            if found.date() >= anchor.date():
                return found
        month = _add(month, 1, "month")
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


def _month_end(anchor: datetime, months_ahead: int) -> datetime:
    month = _add(anchor.replace(day=1), months_ahead, "month")
    return month.replace(day=calendar.monthrange(month.year, month.month)[1])


def _sunday(anchor: datetime, weeks_ahead: int) -> datetime:
    return anchor + timedelta(weeks=weeks_ahead, days=6 - anchor.weekday())


_NOT_A_WEEKDAY = r"(?![一二三四五六日天])"
# (pattern, the last day of the period it names); the first that matches wins, so a longer
# phrase comes before the shorter one inside it (下个月底 before 月底 and 下个月).
_PERIODS = (
    (r"下个?月[底末]|\bend of next month\b", lambda a: _month_end(a, 1)),
    (r"月底|月末|\bend of (the|this) month\b", lambda a: _month_end(a, 0)),
    (r"年底|年末|\bend of (the|this) year\b", lambda a: a.replace(month=12, day=31)),
    (r"下下(周|个?星期|个?礼拜)" + _NOT_A_WEEKDAY + r"|\bweek after next\b", lambda a: _sunday(a, 2)),
    (r"(下周|下个?星期|下个?礼拜)" + _NOT_A_WEEKDAY + r"|\bnext week\b", lambda a: _sunday(a, 1)),
    (r"(这周|本周|这个?星期|这个?礼拜)" + _NOT_A_WEEKDAY + r"|\b(this|end of the) week\b",
     lambda a: _sunday(a, 0)),
    (r"下个?月|\bnext month\b", lambda a: _month_end(a, 1)),
    (r"这个月|本月|\bthis month\b", lambda a: _month_end(a, 0)),
    (r"明年|\bnext year\b", lambda a: a.replace(year=a.year + 1, month=12, day=31)),
    (r"今年|\bthis year\b", lambda a: a.replace(month=12, day=31)),
)


def _period_end(text: str, anchor: datetime) -> datetime | None:
    for pattern, last_day in _PERIODS:
        if re.search(pattern, text, re.I):
            return last_day(anchor)
    return None


def _clock(text: str) -> tuple[int, int] | None:
    m = re.search(r"(上午|早上|早|中午|下午|傍晚|晚上|晚|夜里|凌晨)?\s*(\d{1,2}|[一二两三四五六七八九十]+)\s*[点點时](半|(\d{1,2})分?)?", text)
    if m:
        hour = zh_number(m.group(2))
        if hour is None or hour > 24:
            return None
        if m.group(1) in ("下午", "傍晚", "晚上", "晚", "夜里") and hour < 12:
            hour += 12
        minute = 30 if m.group(3) == "半" else int(m.group(4)) if m.group(4) else 0
        return hour % 24, minute
    if re.search(r"\b(?:at\s+)?noon\b|中午十二点", text, re.I):
        return 12, 0
    m = re.search(r"\b(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)", text, re.I) or \
        re.search(r"\bat\s+(\d{1,2}):(\d{2})\b()", text, re.I) or \
        re.search(r"\bat\s+(\d{1,2})()\b(?=\s*(?:o'clock|tonight|this evening|in the evening|$|[,.!;]))()", text, re.I)
    if m:
        hour, minute = int(m.group(1)), int(m.group(2) or 0)
        suffix = (m.group(3) or "").lower().replace(".", "")
        if not suffix and hour < 12 and re.search(r"\b(tonight|evening|dinner)\b", text, re.I):
            suffix = "pm"  # "dinner at 8", "tonight at 7:30"
        if suffix == "pm" and hour < 12:
            hour += 12
        if suffix == "am" and hour == 12:
            hour = 0
        if hour < 24 and minute < 60:
            return hour, minute
    return None


def deadline(text: str, anchor: datetime) -> datetime | None:
    """When a plan in `text` falls due, relative to `anchor` (the memory's original time)."""
    moment = _hours_ahead(text, anchor)
    if moment is not None:
        return moment
    day = (_relative_span(text, anchor) or _calendar_date(text, anchor) or _weekday(text, anchor)
           or _weekend(text, anchor) or _day_offset(text, anchor) or _ordinal_day(text, anchor)
           or _named_month(text, anchor) or _period_end(text, anchor))
    clock = _clock(text)
    if day is None and clock is None:
        return None
    if clock is None:
        return _end_of_day(day)
    moment = (day or anchor).replace(hour=clock[0], minute=clock[1], second=0, microsecond=0)
    if day is None and moment < anchor:  # "at 3pm" said at four: tomorrow's, not a plan already due
        moment += timedelta(days=1)
    return moment


# -- Dates of events, past or planned (the summarizer's "yesterday (7 May 2023)") ---------------


_EN_UNITS = r"(day|week|month|year)s?"
_EN_COUNT = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_DAY_WORDS = ((r"\bthe day before yesterday\b", -2), (r"\bday after tomorrow\b", 2),
              (r"\byesterday\b", -1), (r"\blast night\b", -1), (r"\btomorrow\b", 1),
              (r"\b(?:today|tonight|this (?:morning|afternoon|evening)|earlier today)\b", 0),
              ("大前天", -3), ("前天", -2), ("昨天|昨晚|昨日", -1), ("大后天", 3), ("后天", 2),
              ("明天|明晚|明早", 1), ("今天|今晚|今早|今日", 0))


@dataclass(frozen=True)
class DateMention:
    """A time expression in a text and the date it names (its first day for a week, month or year)."""

    start: int
    end: int
    text: str
    day: datetime
    precision: str  # "day" | "weekend" | "week" | "month" | "year"

    def label(self, chinese: bool = False) -> str:
        """The resolved date, written so that deadline() reads it back (12 May 2023, 2023年5月12日)."""
        d = self.day
        if chinese:
            return {"day": f"{d.year}年{d.month}月{d.day}日", "weekend": f"{d.year}年{d.month}月{d.day}日那个周末",
                    "week": f"{d.year}年{d.month}月{d.day}日那周",
                    "month": f"{d.year}年{d.month}月", "year": f"{d.year}年"}[self.precision]
        month = calendar.month_name[d.month]
        return {"day": f"{d.day} {month} {d.year}", "weekend": f"the weekend of {d.day} {month} {d.year}",
                "week": f"the week of {d.day} {month} {d.year}",
                "month": f"{month} {d.year}", "year": str(d.year)}[self.precision]


def date_mentions(text: str, anchor: datetime, past: bool = False) -> list[DateMention]:
    """Every time expression of `text` that names a day, week, month or year, resolved against
    `anchor` (when it was said). `past` says how to read an expression that could go either way
    (a bare "Friday", "in May", "3月5日"): the last one before the anchor for an event told,
    the next one for a plan. Expressions that overlap an earlier, longer one are skipped."""
    found: list[DateMention] = []
    for finder in (_mention_spans, _mention_calendar, _mention_weekdays, _mention_days, _mention_periods):
        for start, end, day, precision in finder(text, anchor, past):
            if all(end <= m.start or start >= m.end for m in found):
                found.append(DateMention(start, end, text[start:end], day, precision))
    return sorted(found, key=lambda m: m.start)


def _start_of(day: datetime, precision: str) -> datetime:
    day = day.replace(hour=0, minute=0, second=0, microsecond=0)
    if precision == "week":
        return day - timedelta(days=day.weekday())
    if precision == "month":
        return day.replace(day=1)
    if precision == "year":
        return day.replace(month=1, day=1)
    return day


def _mention_spans(text: str, anchor: datetime, past: bool):
    """N days / weeks / months / years ago, in N ..., N天前, 三个月后."""
    for m in re.finditer(rf"\b{_EN_COUNT}\s+{_EN_UNITS}\s+ago\b", text, re.I):
        n = int(m.group(1)) if m.group(1).isdigit() else _EN_NUMBERS[m.group(1).lower()]
        unit = m.group(2).lower()
        yield m.start(), m.end(), _start_of(_shift(anchor, -n, unit), unit), unit
    for m in re.finditer(rf"\bin\s+{_EN_COUNT}\s+{_EN_UNITS}\b", text, re.I):
        n = int(m.group(1)) if m.group(1).isdigit() else _EN_NUMBERS[m.group(1).lower()]
        unit = m.group(2).lower()
        yield m.start(), m.end(), _start_of(_add(anchor, n, unit), unit), unit
    for m in re.finditer(_ZH_COUNT + r"\s*(个星期|个礼拜|个月|星期|礼拜|天|日|周|年)(前|以前|之前|后|以后|之后)", text):
        n = zh_number(m.group(1))
        if n is not None:
            unit = _ZH_UNIT[m.group(2)]
            sign = -1 if m.group(3).endswith("前") else 1
            yield m.start(), m.end(), _start_of(_shift(anchor, sign * n, unit), unit), unit


def _shift(anchor: datetime, n: int, unit: str) -> datetime:
    """anchor moved by n (possibly negative) days, weeks, months or years."""
    return _add(anchor, 12 * n, "month") if unit == "year" else _add(anchor, n, unit)


def _mention_calendar(text: str, anchor: datetime, past: bool):
    """March 5 / 5 March / 3月5日 (a full date), then a month alone: in May, 5月, 五月份."""
    months = "|".join(sorted(_EN_MONTH, key=len, reverse=True))
    patterns = ((r"(?:(\d{4})年)?(\d{1,2}|[一二三四五六七八九十]+)月(\d{1,2}|[一二三四五六七八九十]+)[日号]", "zh"),
                (rf"\b({months})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s*(\d{{4}}))?", "md"),
                (rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({months})\b(?:,?\s*(\d{{4}}))?", "dm"))
    for pattern, shape in patterns:
        for m in re.finditer(pattern, text, re.I):
            if shape == "zh":
                year, month, day = (int(m.group(1)) if m.group(1) else None), zh_number(m.group(2)), zh_number(m.group(3))
            else:
                a, b = (m.group(1), m.group(2)) if shape == "md" else (m.group(2), m.group(1))
                year, month, day = (int(m.group(3)) if m.group(3) else None), _EN_MONTH[a.lower()], int(b)
            resolved = _dated(anchor, year, month, day, past)
            if resolved is not None:
                yield m.start(), m.end(), resolved, "day"
    for m in re.finditer(rf"\b(?:(last|next|this|in|since|during|until|by)\s+)({months})\b(?:\s+(\d{{4}}))?", text, re.I):
        word = m.group(2).lower()
        if word == "may" and not m.group(1):
            continue
        direction = {"last": True, "since": True, "next": False, "until": False, "by": False}.get(
            (m.group(1) or "").lower(), past)
        yield m.start(), m.end(), _month_of(anchor, _EN_MONTH[word], m.group(3), direction), "month"
    for m in re.finditer(r"(?<![\d一二三四五六七八九十个])(\d{1,2}|十[一二]?|[一二三四五六七八九])月份?(?![\d一二三四五六七八九十日号])", text):
        month = zh_number(m.group(1))
        if month and 1 <= month <= 12:
            yield m.start(), m.end(), _month_of(anchor, month, None, past), "month"


def _dated(anchor: datetime, year: int | None, month: int | None, day: int | None, past: bool) -> datetime | None:
    if not past or year is not None:
        found = _future_date(anchor, year, month, day) if year is None else _exact(year, month, day)
        return _start_of(found, "day") if found else None
    found = _exact(anchor.year, month, day)
    if found is not None and found.date() > anchor.date():
        found = _exact(anchor.year - 1, month, day)
    return found


def _exact(year: int, month: int | None, day: int | None) -> datetime | None:
    try:
        return datetime(year, month or 0, day or 0)
    except (TypeError, ValueError):
        return None


def _month_of(anchor: datetime, month: int, year: str | None, past: bool) -> datetime:
    if year:
        return datetime(int(year), month, 1)
    if past:
        return datetime(anchor.year - (month > anchor.month), month, 1)
    return datetime(anchor.year + (month < anchor.month), month, 1)


def _mention_weekdays(text: str, anchor: datetime, past: bool):
    """last / next / this Friday, on Friday, 上周六, 下周三, 周五."""
    monday = _start_of(anchor, "week")
    for m in re.finditer(r"(?<!每)(?<!每个)(上上|下下|上个?|下个?|这个?|本)?(?:周|星期|礼拜)([一二三四五六日天])", text):
        prefix, target = m.group(1) or "", _ZH_WEEKDAY[m.group(2)]
        weeks = {"上上": -2, "下下": 2}.get(prefix, -1 if prefix.startswith("上") else 1 if prefix.startswith("下") else 0)
        day = monday + timedelta(weeks=weeks, days=target)
        if not prefix:
            day = _nearest(anchor, target, past)
        yield m.start(), m.end(), day, "day"
    for m in re.finditer(r"(?<!every )(?<!each )\b(?:(last|next|this|on|coming|past)\s+)?(" + "|".join(_EN_WEEKDAY) + r")\b", text, re.I):
        prefix, target = (m.group(1) or "").lower(), _EN_WEEKDAY[m.group(2).lower()]
        if prefix == "next":  # like 下周X: that day of next week, as deadline() reads it
            day = monday + timedelta(weeks=1, days=target)
        elif prefix in ("last", "past"):
            day = _nearest(anchor, target, past=True)
        elif prefix == "coming":
            day = _nearest(anchor, target, past=False)
        else:
            day = _nearest(anchor, target, past)
        yield m.start(), m.end(), day, "day"


def _nearest(anchor: datetime, weekday: int, past: bool) -> datetime:
    """The closest such weekday before the anchor (past) or from the anchor on (future)."""
    today = _start_of(anchor, "day")
    if past:
        return today - timedelta(days=(today.weekday() - weekday) % 7 or 7)
    return today + timedelta(days=(weekday - today.weekday()) % 7)


def _mention_days(text: str, anchor: datetime, past: bool):
    for pattern, days in _DAY_WORDS:
        for m in re.finditer(pattern, text, re.I):
            yield m.start(), m.end(), _start_of(anchor + timedelta(days=days), "day"), "day"


def _mention_periods(text: str, anchor: datetime, past: bool):
    """last / this / next week, weekend, month, year; 上周, 下个月, 去年, 明年."""
    en = {"last": -1, "past": -1, "this": 0, "next": 1}
    saturday = _start_of(anchor, "week") + timedelta(days=5)  # a weekend is named by its Saturday
    for m in re.finditer(r"\b(last|past|this|next)\s+(week|weekend|month|year)\b", text, re.I):
        n, unit = en[m.group(1).lower()], m.group(2).lower()
        if unit == "weekend":
            yield m.start(), m.end(), saturday + timedelta(weeks=n), "weekend"
        else:
            yield m.start(), m.end(), _start_of(_shift(anchor, n, unit), unit), unit
    # Weekends with a word saying which (a bare 周末 may be a habit); before 上周 / 下周 inside them.
    for pattern, n in (("上上个?周末", -2), ("上个?周末", -1), ("这个?周末|本周末", 0), ("下下个?周末", 2),
                       ("下个?周末", 1)):
        for m in re.finditer(pattern, text):
            yield m.start(), m.end(), saturday + timedelta(weeks=n), "weekend"
    zh = (("上上周|上上个?星期|上上个?礼拜", -2, "week"), ("上周|上个?星期|上个?礼拜", -1, "week"),
          ("这周|本周|这个?星期|这个?礼拜", 0, "week"), ("下下周|下下个?星期", 2, "week"),
          ("下周|下个?星期|下个?礼拜", 1, "week"), ("上上个月", -2, "month"), ("上个?月", -1, "month"),
          ("这个月|本月", 0, "month"), ("下个?月", 1, "month"), ("前年", -2, "year"), ("去年", -1, "year"),
          ("今年", 0, "year"), ("明年", 1, "year"), ("后年", 2, "year"))
    for pattern, n, unit in zh:
        for m in re.finditer(pattern, text):
            yield m.start(), m.end(), _start_of(_shift(anchor, n, unit), unit), unit
