"""Atoms as the layers above the store see them: their types and states, a row to store and
the memory that owns it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

AtomType = Literal["episodic", "planned", "factual", "relational", "preference", "unknown"]

ATOM_TYPES: tuple[str, ...] = get_args(AtomType)

# The subject of an atom about the user themself (any other subject names a person:
# shared/extract/subjects.py); an atom stored before subjects were read has none.
SELF_SUBJECT = "self"

ATOM_STATES = ("active", "expired", "forgotten", "purged", "dormant", "superseded")


@dataclass(frozen=True)
class AtomRow:
    """One atom to store for a memory (already classified)."""

    type: str
    text: str
    tokens: str
    confidence: float
    subject: str | None = None
    attribute: str | None = None
    value: str | None = None
    deadline: float | None = None
    ttl_days: float | None = None


@dataclass(frozen=True)
class AtomOwner:
    """The memory an atom belongs to, as the atom rows repeat it."""

    memory_id: int
    persona_id: str | None
    session_id: str | None
    importance: float
    content_hash: str


# The atom states whose plan still tells when something happens: a plan past its deadline is
# expired, and still says it happened then.
DATED_STATES = ("active", "expired")


def in_chain(atom_id: int, rows: list[Any]) -> list[Any]:
    """A chain's rows, or none when the atom it was asked for is not among them."""
    return rows if any(row[0] == atom_id for row in rows) else []
