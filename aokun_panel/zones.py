"""The one time zone every time on the panel is shown in.

A memory's "happened" time keeps the offset it was given (+08:00, -05:00), and stored times
are epoch seconds; shown raw they would mix clocks in one column. So every time is converted
to one zone the user sees named in the header and can change there:

- `aokun_tz` cookie: the zone the user chose (UTC, their browser's, or one seen in the data);
- memory.time_zone, when the config names one: the user's zone, the one "3pm" and "tomorrow"
  are read on (shared/time_zone.py);
- `aokun_browser_tz` cookie: the browser's own zone, which panel.js reports on every page
  (the server cannot know it otherwise);
- else the machine's zone (the very first page, before the browser has said its zone).

A zone is an IANA name ("Asia/Shanghai"), "UTC", or a fixed offset ("+08:00") as memories
carry them, read by shared/time_zone.parse. A plan's deadline is the one exception, on
purpose: it is shown on the clock of the memory that said it, with that clock named (see
pages/atoms.py: due()).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from urllib.parse import unquote

from shared import time_zone
from shared.time_zone import offset_name

CHOSEN_COOKIE = "aokun_tz"
BROWSER_COOKIE = "aokun_browser_tz"


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
    """A zone from its name (as a cookie carries it, URL-quoted), or None when the name is no
    zone we know."""
    found = time_zone.parse(unquote(name)) if name else None
    return Zone(*found) if found else None


def zone_of(moment: datetime | None) -> str | None:
    """The zone a stored time was given in, as a choice for the zone switch ("+08:00")."""
    offset = moment.utcoffset() if moment is not None else None
    return None if offset is None else offset_name(offset)


def chosen(cookies: dict, configured: str = "") -> Zone:
    """The request's zone: the user's choice, else `configured` (memory.time_zone), else the
    browser's, else the machine's."""
    return (parse(cookies.get(CHOSEN_COOKIE)) or parse(configured) or parse(cookies.get(BROWSER_COOKIE))
            or machine())


def machine() -> Zone:
    """The machine's zone, named by its IANA name where it has one."""
    tz = time_zone.machine_zone()
    name = getattr(tz, "key", None) or offset_name(datetime.now(tz).utcoffset() or timedelta(0))
    return parse(name) or Zone(name, tz)


def browser(cookies: dict) -> str | None:
    zone = parse(cookies.get(BROWSER_COOKIE))
    return zone.name if zone else None
