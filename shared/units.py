"""Units of time, in seconds (every time in the store is epoch seconds)."""

HOUR = 3_600.0
DAY = 86_400.0
