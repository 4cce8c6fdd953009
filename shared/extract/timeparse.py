"""Time expressions, Chinese and English, read two ways from one parse (time_expressions.py):

- deadline(): when a plan in a text falls due, for the atoms of planned statements. A date
  without a clock time means the end of that day, a week, weekend, month or year its last day:
  a plan is valid until then, so the later reading of a vague expression is the safer one. A
  clock time without a date means that time on the anchor's day.
- date_mentions(): every expression naming a day, week, month or year and the date it names,
  for the summarizer's "yesterday (7 May 2023)".

Both read on the anchor's clock and answer on it: an anchor in the user's zone (the callers
put it there, shared/time_zone.py) gives "3pm tomorrow" as 15:00 of that zone's next day,
aware; a naive anchor is a wall clock of no zone, and gives naive times.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.extract.time_expressions import KINDS, TimeExpression, find_expressions, resolvable
from shared.extract.time_words import ZH_COUNT_NUMERAL, zh_number

__all__ = ["DateMention", "date_mentions", "deadline", "zh_number"]


def deadline(text: str, anchor: datetime) -> datetime | None:
    """When a plan in `text` falls due, relative to `anchor` (the memory's original time);
    None against an anchor at the calendar's ends (time_expressions.resolvable)."""
    if not resolvable(anchor):
        return None
    chosen = _plan_expression(find_expressions(text, anchor), anchor)
    if chosen is not None and chosen.precision == "moment":
        return chosen.due
    day = chosen.due if chosen is not None else None
    clock = _clock(text)
    if clock is None:
        return None if day is None else day.replace(hour=23, minute=59, second=59, microsecond=0)
    moment = (day or anchor).replace(hour=clock[0], minute=clock[1], second=0, microsecond=0)
    if day is None and moment < anchor:  # "at 3pm" said at four: tomorrow's, not a plan already due
        moment += timedelta(days=1)
    return moment


def _plan_expression(found: list[TimeExpression], anchor: datetime) -> TimeExpression | None:
    """The expression a plan is due by: of the first kind (KINDS) the text has, the latest (周三没空，
    周五去: Friday; a plan is valid until its last date). One naming a day already past (上周三,
    last Friday, 3 days ago, 2023年5月12日 said in 2024) tells when something happened, not when
    the plan is due."""
    coming = [e for e in found if e.due.date() >= anchor.date()]
    for kind in KINDS:
        of_kind = [e for e in coming if e.kind == kind]
        if of_kind:
            return max(of_kind, key=lambda e: e.due)
    return None


def _clock(text: str) -> tuple[int, int] | None:
    """The clock time a text names (今晚八点, 下午3点半, at 5pm, dinner at 8, noon), as (hour, minute)."""
    m = re.search(rf"(上午|早上|早|中午|下午|傍晚|晚上|晚|夜里|凌晨)?\s*"
                  rf"(\d{{1,2}}|[{ZH_COUNT_NUMERAL}]+)\s*[点點时](半|(\d{{1,2}})分?)?", text)
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
    the next one for a plan. Expressions that say not which one (周末, the 14th) are left out."""
    return [DateMention(e.start, e.end, text[e.start:e.end], e.first, e.precision)
            for e in find_expressions(text, anchor, past) if not e.plan_only]
