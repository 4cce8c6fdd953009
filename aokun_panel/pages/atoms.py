"""Atoms: by type and state, how long each active one has left, a plan's deadline on the
clock of the memory that made it, reinforcements, and the chains of atoms that replaced one
another ("我住在北京" → "我现在住在上海")."""

from __future__ import annotations

import time
from datetime import datetime, timezone, tzinfo
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aokun_panel.access import principal_of
from aokun_panel.i18n import language_of, translate
from aokun_panel.render import Page, render
from aokun_panel.words import age
from shared.access import view_persona
from shared.atom_life import time_factor
from shared.errors import AccessDenied
from shared.store.model.atoms import ATOM_STATES, ATOM_TYPES
from shared.time_zone import on_clock, user_zone
from shared.units import DAY

PAGE = Page("/atoms", "Atoms")
PAGE_SIZE = 50
MAX_PAGE = 1_000_000  # far past any store; keeps the offset a number SQLite takes
WEEKDAYS_ZH = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")


def shelf_life(row, now: float, lang: str = "en") -> dict | None:
    """What is left of an active atom's validity: until its deadline (a plan), else in its
    shelf life (ttl_days from its last confirmation), as the fraction left for a bar, a label
    and the time factor recall applies (shared/atom_life.time_factor). None when the atom
    is no longer active (its state says why)."""
    if row["state"] != "active":
        return None
    if row["deadline"] is not None:
        start, end, kind = row["create_time"], row["deadline"], "atoms.kind_deadline"
    elif row["ttl_days"]:
        start = row["state_time"] or row["create_time"]
        end, kind = start + row["ttl_days"] * DAY, "atoms.kind_shelf"
    else:
        return {"fraction": 1.0, "label": translate(lang, "atoms.never_fades"), "factor": 1.0,
                "kind": translate(lang, "atoms.kind_none")}
    left = end - now
    span = end - start
    fraction = min(1.0, max(0.0, left / span)) if span > 0 else float(left > 0)
    label = (translate(lang, "atoms.left", age=age(lang, left)) if left > 0
             else translate(lang, "atoms.overdue", age=age(lang, -left)))
    return {"fraction": fraction, "label": label, "factor": round(time_factor(row, now), 3),
            "kind": translate(lang, kind)}


def atom_view(row, now: float, zone: tzinfo | None = None, lang: str = "en") -> dict:
    """One atom as the pages show it; `zone` is its memory's clock (see due())."""
    return {
        "id": row["id"], "type": row["type"], "state": row["state"], "text": row["text"],
        "memory_id": row["memory_id"], "persona_id": row["persona_id"],
        "confidence": round(row["confidence"], 3), "importance": round(row["importance"], 3),
        "reinforcement_count": row["reinforcement_count"], "ttl_days": row["ttl_days"],
        "deadline": due(row["deadline"], zone, lang), "deadline_utc": utc(row["deadline"]),
        "superseded_by": row["superseded_by"],
        "slots": (row["subject"], row["attribute"], row["value"]) if row["subject"] else None,
        "needs_repair": bool(row["needs_repair"]), "life": shelf_life(row, now, lang),
    }


def chains(s, rows) -> dict[int, list[dict]]:
    """{atom id: its supersede chain, oldest first} for the atoms that are in one."""
    found = {}
    for row in rows:
        if row["state"] == "dormant":
            continue  # a provenance row: its link means "reinforced", not "replaced"
        chain = s.atoms.supersede_chain(row["id"], row["persona_id"])
        if len(chain) > 1:
            found[row["id"]] = [{"id": a["id"], "text": a["text"], "state": a["state"],
                                 "memory_id": a["memory_id"]} for a in chain]
    return found


def atoms_page(s, filters: dict, offset: int, now: float, lang: str = "en", user: str = "") -> dict:
    """One page of atoms (newest first) with their chains, in one read session; `user` is
    memory.time_zone."""
    rows = s.atoms.page(filters["type"], filters["state"], filters["persona"], PAGE_SIZE + 1, offset)
    shown = rows[:PAGE_SIZE]
    zones = memory_zones(s, [r["memory_id"] for r in shown if r["deadline"] is not None], user_zone(user))
    return {"atoms": [atom_view(r, now, zones.get(r["memory_id"]), lang) for r in shown],
            "chains": chains(s, shown), "more": len(rows) > PAGE_SIZE}


def memory_zones(s, memory_ids: list[int], user: tzinfo) -> dict[int, tzinfo | None]:
    """{memory id: the clock its plans were read on}: its original time's own offset, or the
    user's zone (shared/time_zone.py: on_clock)."""
    found = s.documents.get_many(memory_ids)
    return {i: on_clock(d.fields.original_time, user).tzinfo if d.fields.original_time else user
            for i, d in found.items()}


def due(deadline: float | None, zone: tzinfo | None, lang: str = "en") -> str | None:
    """A plan's deadline as its memory meant it: "Fri 10 May 2024, 15:00 (UTC+08:00)". The
    rules resolve "Friday at 3pm" on the clock its memory was said on (memory_zones), so it is
    shown on that clock, not converted; a plan for a day with no hour is due at its end
    (23:59:59), shown as "end of Fri 10 May 2024"."""
    if deadline is None:
        return None
    moment = datetime.fromtimestamp(deadline, zone or timezone.utc)
    if lang == "zh":  # strftime's %a and %b follow the C locale: English names only
        day = f"{moment.year}年{moment.month}月{moment.day}日 {WEEKDAYS_ZH[moment.weekday()]}"
    else:
        day = moment.strftime("%a %d %b %Y")
    if (moment.hour, moment.minute, moment.second) == (23, 59, 59):
        return translate(lang, "atoms.end_of", day=day, zone=moment.tzname())
    return translate(lang, "atoms.at", day=day, time=f"{moment:%H:%M}", zone=moment.tzname())


def counts(s) -> dict[str, dict[str, int]]:
    """{type: {state: atoms}} over the whole store. A full scan (0.1-0.2 s at 150k atoms on a
    busy 2-core machine), so the page asks for it after it has loaded."""
    found: dict[str, dict[str, int]] = {t: {} for t in ATOM_TYPES}
    for atom_type, state, count in s.atoms.counts_by_type_and_state():
        found.setdefault(atom_type, {})[state] = count
    return found


def link(path: str, filters: dict, **changes) -> str:
    """The page's URL with its filters, some of them changed (None or "" leaves one out)."""
    values = {**filters, **changes}
    return f"{path}?{urlencode({k: v for k, v in values.items() if v not in (None, '')})}"


def utc(ts: float | None) -> str | None:
    """An epoch time as the pages show it: 2024-05-08 13:56 UTC."""
    return None if ts is None else datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _filters(request: Request, lang: str = "en") -> tuple[dict, int, str | None]:
    """The filters of the query string, the offset, and what was wrong with them (or None)."""
    query = request.query_params
    filters = {"type": query.get("type") or None, "state": query.get("state") or None,
               "persona": query.get("persona") or None}
    problem = None
    if filters["type"] not in (None, *ATOM_TYPES):
        problem = translate(lang, "problem.one_of", name="type", allowed=", ".join(ATOM_TYPES),
                            got=repr(filters["type"][:40]))
        filters["type"] = None
    if filters["state"] not in (None, *ATOM_STATES):
        problem = translate(lang, "problem.one_of", name="state", allowed=", ".join(ATOM_STATES),
                            got=repr(filters["state"][:40]))
        filters["state"] = None
    try:
        page = min(max(1, int(query.get("page", "1"))), MAX_PAGE)
    except ValueError:
        page, problem = 1, translate(lang, "problem.page", got=repr(query.get("page", "")[:40]))
    return filters, (page - 1) * PAGE_SIZE, problem


def routes(ctx) -> list[Route]:
    async def page(request: Request):
        lang = language_of(request)
        filters, offset, problem = _filters(request, lang)
        status = 400 if problem else 200
        principal = principal_of(request)
        try:  # a user sees one of its personas at a time, never the store's all
            filters["persona"] = view_persona(principal, filters["persona"], ctx.live.now.memory.default_persona_id)
            data = await ctx.reader.run(atoms_page, filters, offset, time.time(), lang,
                                        ctx.live.now.memory.time_zone)
        except AccessDenied:
            problem, status = translate(lang, "access.persona_refused", persona=filters["persona"],
                                        personas=principal.listed()), 403
            data = {"atoms": [], "chains": {}, "more": False}
        return render(ctx, request, "atoms.html", PAGE, status_code=status,
                      data=data, filters=filters, problem=problem, types=ATOM_TYPES,
                      states=ATOM_STATES, page_number=offset // PAGE_SIZE + 1,
                      link=lambda **changes: link(PAGE.path, filters, **changes))

    async def counts_data(request: Request):
        return JSONResponse({"counts": await ctx.reader.run(counts)})

    return [Route("/atoms", page), Route("/api/atoms/counts", counts_data)]
