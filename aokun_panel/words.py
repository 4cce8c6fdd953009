"""Server-side texts that depend on numbers, in the page's language: durations, and the
pipeline's warnings (shared/pipeline_warnings.py says them in English for the CLI; the panel says the same
things, from the same figures, in either language; tests/test_panel_i18n.py holds the English
ones equal to shared/pipeline_warnings')."""

from __future__ import annotations

from aokun_panel.i18n import translate
from shared.units import DAY, HOUR

TROUBLE = ("stuck", "retrying", "failed")  # shared/pipeline_warnings.py's _TROUBLE figures, in its order


def age(lang: str, seconds) -> str:
    """40 s, 12 min, 2 h, 3 days (40 秒, 12 分钟 ...), as shared.pipeline_warnings.format_age rounds."""
    if seconds is None:
        return translate(lang, "js.never")
    seconds = max(0.0, float(seconds))
    if seconds < 90:
        return translate(lang, "age.s", n=f"{seconds:.0f}")
    if seconds < 90 * 60:
        return translate(lang, "age.min", n=f"{seconds / 60:.0f}")
    if seconds < 48 * HOUR:
        return translate(lang, "age.h", n=f"{seconds / HOUR:.0f}")
    return translate(lang, "age.days", n=f"{seconds / DAY:.0f}")


def stages(lang: str, n: int) -> str:
    return translate(lang, "warn.stage" if n == 1 else "warn.stages", n=n)


def pipeline_warnings(lang: str, queue: dict, live_workers: int, newest_heartbeat: float | None,
                      now: float) -> list[str]:
    """shared.pipeline_warnings.pipeline_warnings, in `lang`."""
    lines = []
    waiting = queue.get("pending", 0) + queue.get("running", 0)
    if waiting and not live_workers:
        since = (translate(lang, "warn.never_ran") if newest_heartbeat is None
                 else translate(lang, "warn.none_alive", age=age(lang, now - newest_heartbeat)))
        lines.append(translate(lang, "warn.pending", stages=stages(lang, waiting), since=since))
    for figure in TROUBLE:
        if queue.get(figure, 0):
            lines.append(translate(lang, f"warn.{figure}", stages=stages(lang, queue[figure])))
    return lines
