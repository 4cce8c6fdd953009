"""Forgetting: what a setting will do, before it is saved.

Both plots are computed here by the code the worker runs (shared.decay, and ttl_days of the
atoms stage) and served as JSON; the browser only draws them (uPlot, vendored). Settings to
try come in the query string and are checked by the config loader itself, so a value the
settings page would refuse is refused here with the same message.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aokun_panel.i18n import language_of, translate
from aokun_panel.render import Page, render
from shared.config import AppConfig, build_config
from shared.decay import ATOM_CURVES, atom_time_factor, importance_over_days
from shared.errors import AokunError, InvalidInput
from shared.extract.atomize import ttl_days
from shared.store.model.atoms import ATOM_TYPES

log = logging.getLogger("aokun.panel")

PAGE = Page("/forgetting", "Forgetting")
CURVE_DAYS = 90
ATOM_POINTS = 400          # samples per shelf-life curve
MAX_ATOM_DAYS = 3650

# The settings each plot lets a user try, by config section.
DECAY_KEYS = {"forgetting": ("decay_rate", "access_decay_window_days", "access_count_decay_multiplier",
                             "cleanup_importance_threshold")}
ATOM_KEYS = {"atoms": tuple(f"ttl_{t}_days" for t in ATOM_TYPES),
             "forgetting": ("atom_forget_delay_days", "atom_purge_delay_days")}


def tried_config(current: AppConfig, query, keys: dict[str, tuple[str, ...]]) -> AppConfig:
    """The current config with the settings given in the query string, each validated by the
    config loader (a bad one raises ConfigError with the loader's message)."""
    raw = {section: {key: _number_or_text(query[key]) for key in names if query.get(key, "") != ""}
           for section, names in keys.items()}
    checked = build_config({s: v for s, v in raw.items() if v}, Path("."))
    changes = {}
    for section, values in raw.items():
        if values:
            picked = {key: getattr(getattr(checked, section), key) for key in values}
            changes[section] = dataclasses.replace(getattr(current, section), **picked)
    return dataclasses.replace(current, **changes)


def _number_or_text(raw: str):
    try:
        return float(raw)
    except ValueError:
        return raw  # the loader names the key and says a number is wanted


def _memory_input(query, name: str, default, low: float, high: float | None, whole: bool = False):
    raw = query.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = math.nan
    if not (value >= low and (high is None or value <= high)):
        span = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise InvalidInput(f"{name} must be a {'whole ' if whole else ''}number {span}, got {raw[:40]!r}")
    return value


# -- the two plots ----------------------------------------------------------------------------


def decay_curves(current: AppConfig, query) -> dict:
    """A memory's importance over the next CURVE_DAYS daily decays, with the settings tried and
    with the current ones."""
    tried = tried_config(current, query, DECAY_KEYS)
    importance = _memory_input(query, "importance", 0.5, 0.0, 1.0)
    accesses = _memory_input(query, "accesses", 0.0, 0.0, 1e6)
    since = _memory_input(query, "days_since_access", None, 0.0, 1e6)

    def curve(f) -> list[float]:
        points = importance_over_days(importance, accesses, since, CURVE_DAYS, f.decay_rate,
                                      f.access_count_decay_multiplier, f.access_decay_window_days)
        return [value for value, _ in points]

    values = curve(tried.forgetting)
    threshold = tried.forgetting.cleanup_importance_threshold
    return {
        "days": list(range(CURVE_DAYS + 1)), "tried": values, "current": curve(current.forgetting),
        "threshold": threshold,
        "below_threshold_day": next((day for day, v in enumerate(values) if v < threshold), None),
        "settings": _settings(tried, DECAY_KEYS), "current_settings": _settings(current, DECAY_KEYS),
        "memory": {"importance": importance, "accesses": accesses, "days_since_access": since},
        "cleanup_days_threshold": tried.forgetting.cleanup_days_threshold,
        "auto_cleanup_enabled": tried.forgetting.auto_cleanup_enabled,
    }


def atom_curves(current: AppConfig, query) -> dict:
    """Each atom type's time factor over its shelf life (ttl_days of the atoms stage, from the
    settings tried), and when the sweep expires, forgets and purges it."""
    tried = tried_config(current, query, ATOM_KEYS)
    importance = _memory_input(query, "importance", 0.5, 0.0, 1.0)
    reinforcements = int(_memory_input(query, "reinforcements", 0, 0, 1000, whole=True))  # whole: an int already
    ttls = {t: ttl_days(t, importance, reinforcements, tried.atoms) for t in ATOM_TYPES}
    f = tried.forgetting
    horizon = min(MAX_ATOM_DAYS, max(30.0, max(ttls.values()) * 1.1))
    days = [round(horizon * i / ATOM_POINTS, 3) for i in range(ATOM_POINTS + 1)]
    types = {}
    for atom_type, ttl in ttls.items():
        # Past its shelf life the sweep expires an atom (out of search): its line ends there.
        factors = [atom_time_factor(atom_type, day, ttl) if day <= ttl else None for day in days]
        if ATOM_CURVES.get(atom_type) == "step":
            # A step stays at 1 until it ends: drawn as it was, it lay along the top edge
            # under every other curve (all start at 1) for a few days of a months-long axis,
            # so it could not be seen. Its drop to 0 where it expires is what shows it.
            after = next((i for i, day in enumerate(days) if day > ttl), None)
            if after is not None:
                factors[after] = 0.0
        types[atom_type] = {"ttl_days": ttl, "base_days": tried.atoms.base_ttl_days(atom_type),
                            "curve": ATOM_CURVES.get(atom_type), "factors": factors,
                            "forgotten_day": ttl + f.atom_forget_delay_days,
                            "purged_day": ttl + f.atom_forget_delay_days + f.atom_purge_delay_days}
    return {"days": days, "types": types, "importance": importance, "reinforcements": reinforcements,
            "settings": _settings(tried, ATOM_KEYS), "current_settings": _settings(current, ATOM_KEYS)}


def _settings(config: AppConfig, keys: dict[str, tuple[str, ...]]) -> dict:
    return {f"{section}.{key}": getattr(getattr(config, section), key)
            for section, names in keys.items() for key in names}


# -- routes -----------------------------------------------------------------------------------


def routes(ctx) -> list[Route]:
    def answer(build):
        async def handler(request: Request):
            try:
                return JSONResponse(build(ctx.live.now, request.query_params))
            except AokunError as error:  # a setting the loader refuses, a value out of range
                return JSONResponse({"error": str(error)}, status_code=400)
            except Exception:
                log.exception("%s failed (a bug)", request.url.path)
                return JSONResponse({"error": translate(language_of(request), "common.internal")}, status_code=500)
        return handler

    async def page(request: Request):
        config = ctx.live.now
        return render(ctx, request, "forgetting.html", PAGE,
                      decay=_settings(config, DECAY_KEYS), atom_settings=_settings(config, ATOM_KEYS),
                      forgetting=config.forgetting, types=ATOM_TYPES)

    return [Route("/forgetting", page), Route("/api/forgetting/curve", answer(decay_curves)),
            Route("/api/forgetting/atoms", answer(atom_curves))]
