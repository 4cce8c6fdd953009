"""A persona's memories as one readable Markdown file (aokun export --format markdown).

For reading and for other tools, not for coming back: the JSONL export is the one that
round-trips. Each memory is a level-2 heading (when it happened, its id, pinned / archived),
its text, and a list of what the store keeps about it. Pure.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone

from shared.store.model.documents import Document, unmarked

NO_PERSONA = "no-persona"
_UNSAFE = re.compile(r"[^\w.-]+")


def file_name(persona_id: str | None) -> str:
    """The file of a persona: its id where that is a safe file name, else a safe form of it
    with a hash of the id (two personas never share a file)."""
    if persona_id is None:
        return f"{NO_PERSONA}.md"
    safe = _UNSAFE.sub("_", persona_id).strip("._")[:80] or "persona"
    if safe != persona_id or safe == NO_PERSONA:
        safe += "-" + hashlib.sha256(persona_id.encode("utf-8")).hexdigest()[:8]
    return f"{safe}.md"


def head(persona_id: str | None, count: int, now: float) -> str:
    import yaml

    front = yaml.safe_dump({"persona": persona_id, "memories": count, "exported_at": _utc(now)},
                           allow_unicode=True, sort_keys=False)
    title = f"Memories of {persona_id}" if persona_id is not None else "Memories without a persona"
    return f"---\n{front}---\n\n# {title}\n"


def section(doc: Document, atoms: list[dict] | None) -> str:
    fields = doc.fields
    flags = [flag for flag, on in (("pinned", fields.pinned), ("archived", doc.archived)) if on]
    when = _when(doc)
    heading = " · ".join([when, f"memory {doc.id}", *flags])
    facts = [
        f"- happened: {fields.original_time.isoformat()}" if fields.original_time else
        "- happened: not given (the time above is when it was stored)",
        f"- stored: {_utc(doc.create_time)}; updated: {_utc(doc.update_time)}",
        f"- importance: {fields.importance:.2f}; sentiment: {fields.sentiment}; recalled "
        f"{_count(doc.access_count)} times" + (f", last {_utc(doc.last_access_time)}" if doc.last_access_time else ""),
    ]
    for label, value in (("session", fields.session_id), ("topics", ", ".join(fields.topics)),
                         ("participants", ", ".join(fields.participants)),
                         ("persona summary", fields.persona_summary)):
        if value:
            facts.append(f"- {label}: {value}")
    if fields.key_facts:
        facts.append("- key facts:")
        facts += [f"  - {fact}" for fact in fields.key_facts]
    if atoms:
        facts.append("- atoms:")
        facts += [f"  - {_atom(atom)}" for atom in atoms]
    return f"\n## {heading}\n\n{unmarked(doc.text)}\n\n" + "\n".join(facts) + "\n"


def _when(doc: Document) -> str:
    """The time of the memory's marker: when it happened, else when it was stored (UTC)."""
    moment = doc.fields.original_time or datetime.fromtimestamp(doc.create_time, timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M") if (moment.hour, moment.minute) != (0, 0) else moment.strftime("%Y-%m-%d")


def _atom(atom: dict) -> str:
    parts = [atom["type"], atom["state"], f"confidence {atom['confidence']:.2f}"]
    if atom.get("deadline"):
        parts.append(f"until {_utc(atom['deadline'])}")
    if atom.get("reinforcement_count"):
        parts.append(f"reinforced {atom['reinforcement_count']}×")
    return f"{atom['text']} ({', '.join(parts)})"


def _count(value: float) -> str:
    return f"{value:g}"


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
