"""The user's time zone, and the one rule for datetimes.

Every datetime inside is aware; a time is put on a clock where it comes in (on_clock):
- without an offset (2024-05-08T15:00): read on the user's clock, the configured zone
  (memory.time_zone; "" is the machine's own zone);
- in UTC (...Z, +00:00), as hosts and Claude Code's transcripts write a moment: that moment,
  on the user's clock;
- with another offset (+08:00): that moment, on its own clock, which says where it was said.
Relative words ("3pm", "tomorrow", "next Tuesday", "January 15") are read on the clock of the
time they were said at, so for the user "dentist at 3pm tomorrow" is 15:00 of their next day;
a memory's "[2024-05-08 15:00]" marker shows its time on that clock (the time it was stored
on the user's, when it has none). The store keeps epoch seconds (UTC) and a memory's original
time with its offset.

A zone is an IANA name ("America/Los_Angeles"), "UTC", or a fixed offset ("+08:00"); the
panel's zone switch (aokun_panel/zones.py) reads its names with the same parse().
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

UTC_NAME = "UTC"
MAX_NAME = 64  # no IANA name is longer
_OFFSET = re.compile(r"^(?:UTC)?([+-])(\d{2}):?(\d{2})$")


def parse(name: str | None) -> tuple[str, tzinfo] | None:
    """(the name as shown, the zone) for an IANA name, "UTC" or "+08:00"; None for no zone."""
    if not name:
        return None
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        return None
    if name.upper() in ("UTC", "Z", "ETC/UTC"):
        return UTC_NAME, timezone.utc
    offset = _OFFSET.match(name)
    if offset:
        sign, hours, minutes = offset.groups()
        delta = timedelta(hours=int(hours), minutes=int(minutes))
        if delta >= timedelta(hours=24):
            return None
        delta = delta if sign == "+" else -delta
        return offset_name(delta), timezone(delta)
    try:
        return name, ZoneInfo(name)
    except (ValueError, KeyError, OSError):  # zoneinfo's errors for unknown or malformed names
        return None


def offset_name(delta: timedelta) -> str:
    """timedelta(hours=8) -> "+08:00"; zero -> "UTC"."""
    if not delta:
        return UTC_NAME
    minutes = int(delta.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def machine_zone() -> tzinfo:
    """The zone this machine's clock is set to (its DST rules, where the system names it)."""
    import os

    return _machine_zone(os.environ.get("TZ"))


@functools.lru_cache(maxsize=4)
def _machine_zone(tz_variable: str | None) -> tzinfo:
    import time

    name = _system_zone_name()
    found = parse(name) if name else None
    if found is not None:
        return found[1]
    return timezone(timedelta(seconds=-time.altzone if time.daylight and time.localtime().tm_isdst
                              else -time.timezone), time.tzname[0])


def _system_zone_name() -> str | None:
    """The IANA name of the machine's zone: $TZ, /etc/timezone, or where /etc/localtime points."""
    import os
    from pathlib import Path

    name = os.environ.get("TZ", "").lstrip(":")
    if name and parse(name):
        return name
    try:
        written = Path("/etc/timezone").read_text(encoding="utf-8").strip()
        if written and parse(written):
            return written
    except OSError:
        pass
    try:
        target = str(Path("/etc/localtime").resolve())
    except OSError:
        return None
    _, found, tail = target.partition("zoneinfo/")
    return tail if found and parse(tail) else None


def user_zone(name: str) -> tzinfo:
    """The configured zone (memory.time_zone): its name, or "" for the machine's zone. The
    config loader has checked the name (config.py), so an unknown one here is a bug."""
    if not name:
        return machine_zone()
    found = parse(name)
    if found is None:
        raise ValueError(f"unknown time zone {name!r}")
    return found[1]


def problem(name: str) -> str | None:
    """What is wrong with a memory.time_zone value, or None."""
    if name == "" or parse(name) is not None:
        return None
    return "must be an IANA zone name such as America/Los_Angeles, UTC, or an offset such as +08:00"


def in_zone(moment: datetime, zone: tzinfo) -> datetime:
    """`moment` on `zone`'s clock: an aware time converted, a naive one read as that zone's."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=zone)
    return moment.astimezone(zone)


def on_clock(moment: datetime, zone: tzinfo) -> datetime:
    """`moment` on the clock it is read on (the module's rule): its own when it names an
    offset other than UTC's, else the user's `zone`."""
    offset = moment.utcoffset()
    if offset is not None and offset != timedelta(0):
        return moment
    return in_zone(moment, zone)
