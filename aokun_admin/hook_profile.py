"""The profile `aokun hook session-start` prints: pinned memories, the user's own upcoming plans
and strongest preferences, and other people's (each named: "Sarah (wife): ..."; whose a fact is
is its atom's subject), read straight from the store (three SQL reads a persona: no segmenter,
no embedder, no front needed) and fitted to a character budget.

It covers the persona scopes it is given (the caller's: aokun_admin/caller.py), each read
on its own and merged, so a user's profile holds nothing of a persona the token lacks; (None,)
is every persona, the admin's.

Items are taken round-robin across the sections (the first pinned memory, the soonest plan,
the strongest preference, then the second of each, ...) so that one long section cannot
crowd the others out, and printed grouped under their section's heading. An item that does
not fit is left out whole; a line longer than a quarter of the budget is cut, with "…".
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone, tzinfo

from shared.store.model.atoms import SELF_SUBJECT
from shared.store.model.documents import DocumentFilter

_BREAKS = re.compile(r"\s*[\r\n]+\s*")
MIN_LINE = 80


def profile(store, personas: tuple[str | None, ...], per_section: int, budget: int, header: str,
            sections: tuple[tuple[str, str], ...], zone: tzinfo = timezone.utc) -> str:
    """The profile's text over the persona scopes ("" when there is nothing to say, or
    nothing fits); plans' days are on the user's clock (zone)."""
    now = time.time()
    with store.read() as s:
        pinned_docs = pinned(s, personas, per_section)
        plans = upcoming_plans(s, personas, per_section, now, zone)
        preferences = strongest_preferences(s, personas, per_section, now)
    own_plans, others_plans = _split(plans)
    own_preferences, others_preferences = _split(preferences)
    found = {"pinned": pinned_docs, "plans": own_plans, "preferences": own_preferences,
             "others": others_plans + others_preferences}
    return render(found, budget, header, sections)


def _split(items: list[tuple[str | None, str]]) -> tuple[list[str], list[str]]:
    """(the user's own lines, other people's lines named by whose they are): an atom's subject
    is the self, or nobody stated (atoms stored before subjects were read), or another person."""
    own = [line for subject, line in items if _is_own(subject)]
    others = [f"{subject}: {line}" for subject, line in items if not _is_own(subject)]
    return own, others


def _is_own(subject: str | None) -> bool:
    return subject is None or subject == SELF_SUBJECT


def pinned(s, personas: tuple[str | None, ...], limit: int) -> list[str]:
    """Pinned memories, newest first (ids grow with time)."""
    docs = [d for persona in personas for d in s.documents.list_by_state(
        DocumentFilter(persona_id=persona), "pinned", limit, 0, limit)[0]]
    docs = sorted(docs, key=lambda d: -d.id)[:limit]
    return [f"[id {d.id}] {_flat(d.text)}" for d in docs]


def upcoming_plans(s, personas: tuple[str | None, ...], limit: int, now: float,
                   zone: tzinfo = timezone.utc) -> list[tuple[str | None, str]]:
    """Still-valid planned atoms with a deadline, soonest first (search_atoms' order), as
    (subject, line); `limit` of the user's own and `limit` of other people's."""
    rows = [row for persona in personas
            for row in s.atoms.still_valid_of_types(["planned"], persona, None, now, 4 * limit)
            if row["deadline"] is not None]
    rows = _each_side(sorted(rows, key=lambda r: (r["deadline"], -r["id"])), limit)
    return [(row["subject"], f"by {_day(row['deadline'], zone)}: {_flat(row['text'])}") for row in rows]


def _each_side(rows: list, limit: int) -> list:
    """The first `limit` rows of the user's own and the first `limit` of other people's, in order."""
    own = [r["id"] for r in rows if _is_own(r["subject"])][:limit]
    others = [r["id"] for r in rows if not _is_own(r["subject"])][:limit]
    kept = set(own) | set(others)
    return [r for r in rows if r["id"] in kept]


def strongest_preferences(s, personas: tuple[str | None, ...], limit: int,
                          now: float) -> list[tuple[str | None, str]]:
    """Still-valid preference atoms, most confident first, then most important, most
    reinforced, newest; the same text once; as (subject, line), `limit` of the user's own and
    `limit` of other people's."""
    rows = [row for persona in personas
            for row in s.atoms.still_valid_of_types(["preference"], persona, None, now, 500)]
    rows = sorted(rows, key=lambda r: (-r["confidence"], -r["importance"],
                                       -r["reinforcement_count"], -r["id"]))
    seen, kept = set(), []
    for row in rows:
        text = _flat(row["text"])
        if text.casefold() in seen:
            continue
        seen.add(text.casefold())
        kept.append(row)
    return [(row["subject"], _flat(row["text"])) for row in _each_side(kept, limit)]


def render(found: dict[str, list[str]], budget: int, header: str,
           sections: tuple[tuple[str, str], ...]) -> str:
    longest = max(MIN_LINE, budget // 4)
    queues = {name: [_cut(f"- {item}", longest) for item in found.get(name, ())]
              for name, _ in sections}
    if not any(queues.values()):
        return ""
    kept: dict[str, list[str]] = {name: [] for name, _ in sections}
    titles = dict(sections)
    used = len(header)
    while any(queues.values()):
        for name, _ in sections:
            if not queues[name]:
                continue
            item = queues[name].pop(0)
            cost = len(item) + 1 + (0 if kept[name] else len(titles[name]) + 1)
            if used + cost <= budget:
                kept[name].append(item)
                used += cost
    if not any(kept.values()):
        return ""
    lines = [header]
    for name, title in sections:
        if kept[name]:
            lines += [title, *kept[name]]
    return "\n".join(lines)


def _flat(text: str) -> str:
    return _BREAKS.sub(" / ", (text or "").strip())


def _cut(line: str, longest: int) -> str:
    return line if len(line) <= longest else line[:longest - 1].rstrip() + "…"


def _day(deadline: float, zone: tzinfo) -> str:
    return datetime.fromtimestamp(deadline, zone).strftime("%Y-%m-%d")
