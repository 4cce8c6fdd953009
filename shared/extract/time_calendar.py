"""Calendar arithmetic for the time parser (time_expressions.py): days moved by weeks, months
or years, the period a day is in, and the nearest day, weekday or month of a given name.

Arithmetic is on the clock of the day it starts from: a day it makes carries that day's tzinfo
(aware in, aware out; two days compared always share one clock)."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, tzinfo


def midnight(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def shift(day: datetime, n: int, unit: str) -> datetime:
    """`day` moved by n (possibly negative) days, weeks, months or years; the 31st of a shorter
    month is its last day."""
    if unit in ("day", "week"):
        return day + timedelta(days=n * (7 if unit == "week" else 1))
    months = day.month - 1 + n * (12 if unit == "year" else 1)
    year, month = day.year + months // 12, months % 12 + 1
    return day.replace(year=year, month=month, day=min(day.day, calendar.monthrange(year, month)[1]))


def period(day: datetime, unit: str) -> tuple[datetime, datetime]:
    """The first and last day of the day, weekend (Saturday, Sunday), week, month or year `day`
    is in."""
    monday = day - timedelta(days=day.weekday())
    if unit in ("week", "weekend"):
        return monday + timedelta(days=5 if unit == "weekend" else 0), monday + timedelta(days=6)
    if unit == "month":
        return day.replace(day=1), day.replace(day=calendar.monthrange(day.year, day.month)[1])
    if unit == "year":
        return day.replace(month=1, day=1), day.replace(month=12, day=31)
    return day, day


def exact_date(year: int, month: int | None, day: int | None, zone: tzinfo | None) -> datetime | None:
    """Midnight of that day on `zone`'s clock, or None when there is no such day (30 February)."""
    try:
        return datetime(year, month or 0, day or 0, tzinfo=zone)
    except (TypeError, ValueError):
        return None


def nearest_date(today: datetime, month: int | None, day: int | None, past: bool) -> datetime | None:
    """A month and day without a year: the next such day from today on, or (past) the last one
    on or before today."""
    found = exact_date(today.year, month, day, today.tzinfo)
    if found is not None and past and found > today:
        return exact_date(today.year - 1, month, day, today.tzinfo)
    if found is not None and not past and found < today:
        return exact_date(today.year + 1, month, day, today.tzinfo)
    return found


def nearest_weekday(today: datetime, weekday: int, past: bool) -> datetime:
    """The closest such weekday before today (past) or from today on."""
    if past:
        return today - timedelta(days=(today.weekday() - weekday) % 7 or 7)
    return today + timedelta(days=(weekday - today.weekday()) % 7)


def next_day_of_month(today: datetime, number: int) -> datetime | None:
    """The next day numbered `number`, today counting; the 31st may skip a month or two."""
    month = today.replace(day=1)
    for _ in range(3):
        if number <= calendar.monthrange(month.year, month.month)[1] and month.replace(day=number) >= today:
            return month.replace(day=number)
        month = shift(month, 1, "month")
    return None


def year_of_month(today: datetime, month: int, reading: str) -> int:
    """The year of a month named alone: its "next" or "past" occurrence (the current month
    counting), or the one strictly "after" or "before" the current month."""
    if reading in ("past", "before"):
        return today.year - (month > today.month or (reading == "before" and month == today.month))
    return today.year + (month < today.month or (reading == "after" and month == today.month))
