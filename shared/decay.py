"""Time curves as pure functions: recency of a memory, time factor of an atom."""

from __future__ import annotations

import math

# How an atom of each type fades over its shelf life (ttl).
EXPONENTIAL, STEP, LINEAR = "exponential", "step", "linear"
ATOM_CURVES = {
    "episodic": EXPONENTIAL, "factual": EXPONENTIAL, "preference": EXPONENTIAL,
    "planned": STEP, "relational": LINEAR, "unknown": LINEAR,
}


def recency(age_days: float, scale_days: float) -> float:
    """exp(-age/scale): 1.0 for now, 0.37 after one scale; negative ages count as now."""
    return math.exp(-max(age_days, 0.0) / scale_days)


def atom_time_factor(atom_type: str, age_days: float, ttl_days: float | None,
                     days_to_deadline: float | None = None) -> float:
    """How valid an atom still is, in [0, 1].

    exponential: exp(-age/ttl); step (planned): 1 until the deadline, 0 after it;
    linear: 1 - age/ttl, floored at 0. No ttl means no fading.
    """
    curve = ATOM_CURVES.get(atom_type, LINEAR)
    if curve == STEP:
        if days_to_deadline is not None:
            return 1.0 if days_to_deadline >= 0 else 0.0
        return 1.0 if not ttl_days or age_days <= ttl_days else 0.0
    if not ttl_days:
        return 1.0
    age = max(age_days, 0.0)
    if curve == EXPONENTIAL:
        return math.exp(-age / ttl_days)
    return max(0.0, 1.0 - age / ttl_days)


def decayed_importance(importance: float, accesses: float, recently_accessed: bool, rate: float,
                       multiplier: float) -> tuple[float, float]:
    """One day of importance decay: (new importance, new access count).

    importance x (1 - rate x max(0.3, 1 - 0.1 x min(recent accesses, 10))), floored at 0.05,
    where recent accesses count only while the last access is within the window: recalled
    memories fade slower. The access count then shrinks by the multiplier."""
    recent = accesses if recently_accessed else 0.0
    effective = rate * max(0.3, 1.0 - 0.1 * min(recent, 10.0))
    return max(0.05, importance * (1.0 - effective)), accesses * multiplier


def importance_over_days(importance: float, accesses: float, days_since_access: float | None,
                         days: int, rate: float, multiplier: float,
                         window_days: float) -> list[tuple[float, float]]:
    """(importance, access count) today and after each of the next `days` daily decays, as
    decayed_importance applies them when the worker runs every day and nothing recalls the
    memory meanwhile: its last access (days_since_access ago, None for never) counts as
    recent while it is within window_days of that day's run."""
    points = [(importance, accesses)]
    for day in range(1, days + 1):
        recent = days_since_access is not None and days_since_access + day <= window_days
        importance, accesses = decayed_importance(importance, accesses, recent, rate, multiplier)
        points.append((importance, accesses))
    return points
