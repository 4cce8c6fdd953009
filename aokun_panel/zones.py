"""The one time zone every time on the panel is shown in.

A memory's "happened" time keeps the offset it was given (+08:00, -05:00, or none), and stored
times are epoch seconds; shown raw they would mix clocks in one column. So every time is
converted to one zone the user sees named in the header and can change there:

- `aokun_tz` cookie: the zone the user chose (UTC, their browser's, or one seen in the data);
- `aokun_browser_tz` cookie: the browser's own zone, which panel.js reports on every page
  (the server cannot know it otherwise); it is the default once known;
- else UTC (the very first page, before the browser has said its zone).

A zone is an IANA name ("Asia/Shanghai"), "UTC", or a fixed offset ("+08:00") as memories
carry them. A plan's deadline is the one exception, on purpose: it is shown on the clock of the
memory that said it, with that clock named (see pages/atoms.py: due()).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from urllib.parse import unquote
from zoneinfo import ZoneInfo

CHOSEN_COOKIE = "aokun_tz"
BROWSER_COOKIE = "aokun_browser_tz"
UTC = "UTC"
_OFFSET = re.compile(r"^(?:UTC)?([+-])(\d{2}):?(\d{2})$")
MAX_NAME = 64  # no IANA name is longer; a longer cookie is no zone


@dataclass(frozen=True)
class Zone:
    name: str       # as the user sees it and the cookie holds it
    tz: tzinfo

    def when(self, value, seconds: bool = False) -> str:
        """An epoch time or a datetime (naive ones taken as UTC) in this zone:
        "2024-05-08 21:56"; "" for None."""
        if value is None or value == "":
            return ""
        if isinstance(value, datetime):
            moment = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        else:
            moment = datetime.fromtimestamp(float(value), timezone.utc)
        return moment.astimezone(self.tz).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def parse(name: str | None) -> Zone | None:
    """A zone from its name, or None when the name is no zone we know."""
    if not name:
        return None
    name = unquote(name).strip()
    if not name or len(name) > MAX_NAME:
        return None
    if name.upper() in ("UTC", "Z", "ETC/UTC"):
        return Zone(UTC, timezone.utc)
    offset = _OFFSET.match(name)
    if offset:
        sign, hours, minutes = offset.groups()
        delta = timedelta(hours=int(hours), minutes=int(minutes))
        if delta >= timedelta(hours=24):
            return None
        return Zone(offset_name(delta if sign == "+" else -delta), timezone(delta if sign == "+" else -delta))
    try:
        return Zone(name, ZoneInfo(name))
    except (ValueError, KeyError, OSError):  # zoneinfo's errors for unknown or malformed names
        return None


def offset_name(delta: timedelta) -> str:
    """timedelta(hours=8) -> "+08:00"; zero -> "UTC"."""
    if not delta:
        return UTC
    minutes = int(delta.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def zone_of(moment: datetime | None) -> str | None:
    """The zone a stored time was given in, as a choice for the zone switch ("+08:00")."""
    if moment is None or moment.tzinfo is None:
        return None
    return offset_name(moment.utcoffset())


def chosen(cookies: dict) -> Zone:
    """The request's zone: the user's choice, else the browser's, else UTC."""
    return parse(cookies.get(CHOSEN_COOKIE)) or parse(cookies.get(BROWSER_COOKIE)) or Zone(UTC, timezone.utc)


def browser(cookies: dict) -> str | None:
    zone = parse(cookies.get(BROWSER_COOKIE))
    return zone.name if zone else None
