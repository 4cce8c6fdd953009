"""What every import reader yields: a Row to memorize, or a BadRow to report and skip."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from shared.store.documents import History


@dataclass(frozen=True)
class Row:
    """One memory to import, as memorize would take it.

    metadata holds memorize's metadata keys as JSON values (checked by memorize's own model
    when the row is written). source says what makes two rows the same memory: hashed with the
    persona into source_hash, so importing a file again adds nothing. A row from our own export
    may carry the source_hash its memory already had (a transcript's), its id in the store it
    came from, and its history (times, archived flag, accesses)."""

    where: str
    content: str
    metadata: dict = field(default_factory=dict)
    source: str = ""
    source_hash: str | None = None
    origin_id: int | None = None
    history: History | None = None


@dataclass(frozen=True)
class BadRow:
    """A row that cannot be imported: where it is and what is wrong with it."""

    where: str
    problem: str


def source_hash(persona_id: str | None, source: str) -> str:
    """The source_hash of an imported row: the same row for the same persona is one memory,
    the same row imported for another persona another."""
    return hashlib.sha256(f"import\n{persona_id or ''}\n{source}".encode("utf-8")).hexdigest()
