"""Server-side texts that depend on numbers, in the page's language: durations, the
pipeline's warnings and how long until every memory is searchable by meaning
(shared/pipeline_warnings.py and shared/catch_up.py say them in English for the CLI; the panel
says the same things, from the same figures, in either language; tests/test_panel_i18n.py holds
the English ones equal to the CLI's)."""

from __future__ import annotations

from typing import Any

from aokun_panel.i18n import translate
from shared.store.model.stages import EMBED
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


def pace(lang: str, per_s: float) -> str:
    """shared.catch_up.pace, in `lang`."""
    if per_s >= 1:
        return translate(lang, "catch_up.per_s", n=f"{per_s:,.1f}" if per_s < 100 else f"{per_s:,.0f}")
    if per_s * 60 >= 0.5:
        return translate(lang, "catch_up.per_min", n=f"{per_s * 60:.1f}")
    return translate(lang, "catch_up.per_h", n=f"{per_s * 3600:.1f}")


def catch_up(lang: str, figures: dict[str, Any]) -> dict[str, Any]:
    """From shared.catch_up.CatchUp.as_dict(): its line (CatchUp.line) and, per stage, what
    waits, the pace and the time left, in `lang`."""
    workers = figures["workers"]
    stages = [{"stage": p["stage"], "waiting": p["waiting"],
               "pace": pace(lang, p["per_s"]) if p["per_s"] else "",
               "estimate": _stage_estimate(lang, p, workers)} for p in figures["stages"]]
    return {"line": _line(lang, next(p for p in figures["stages"] if p["stage"] == EMBED), workers),
            "stages": stages}


def _stage_estimate(lang: str, stage: dict[str, Any], workers: int) -> str:
    if not stage["waiting"]:
        return translate(lang, "catch_up.none_waits")
    if not workers:
        return translate(lang, "catch_up.stage_no_worker")
    if stage["eta_s"] is None:
        return translate(lang, "catch_up.stage_unknown")
    return translate(lang, "catch_up.about", eta=age(lang, max(1.0, stage["eta_s"])))


def _line(lang: str, embed: dict[str, Any], workers: int) -> str:
    waiting = embed["waiting"]
    if not waiting:
        return translate(lang, "catch_up.all_done")
    memories = translate(lang, "catch_up.memory" if waiting == 1 else "catch_up.memories", n=f"{waiting:,}")
    waits = translate(lang, "catch_up.waits" if waiting == 1 else "catch_up.wait", memories=memories)
    if not workers:
        return translate(lang, "catch_up.no_worker", waits=waits)
    window = age(lang, embed["window_s"])
    if embed["eta_s"] is None:
        return translate(lang, "catch_up.unknown", waits=waits, window=window)
    return translate(lang, "catch_up.estimate", waits=waits, window=window,
                     eta=age(lang, max(1.0, embed["eta_s"])), pace=pace(lang, embed["per_s"]))
