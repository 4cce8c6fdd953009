"""Memories read from the store and written out: JSONL (round-trips) or Markdown (one file per
persona, for reading).

One read transaction covers the whole export, so a memory written meanwhile is either in it
whole or not at all. Files are written beside their target and renamed into place: an export
cut short leaves the previous file, never half of one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from shared.errors import InvalidInput
from shared.platform import PRIVATE_FILE
from shared.store.interface import Session, Store
from shared.store.model.documents import Document, DocumentFilter
from shared.transfer import jsonl, render

CHUNK = 500


def export_jsonl(store: Store, path: Path, persona_id: str | None, with_atoms: bool, now: float,
                 scopes: Sequence[str | None] | None = None) -> int:
    """Write every memory (of one persona when given) to path; return how many. `scopes`: the
    personas to export (shared/access.read_personas: a user's token holds only some), None for
    every memory as persona_id says."""
    if path.is_dir():
        raise InvalidInput(f"{path} is a folder: the JSONL export is one file (a folder is --format markdown)")
    with store.read() as s:
        ids = _ids(s, persona_id, scopes)
        with _replacing(path) as out:
            out.write(jsonl.line(jsonl.header(persona_id, len(ids), with_atoms, now)))
            for doc, atoms in _memories(s, ids, with_atoms):
                out.write(jsonl.line(jsonl.memory_record(doc, atoms)))
    return len(ids)


def export_markdown(store: Store, folder: Path, persona_id: str | None, with_atoms: bool,
                    now: float, scopes: Sequence[str | None] | None = None) -> dict[str | None, int]:
    """Write one Markdown file per persona into folder; return {persona: memories}. `scopes`
    as for export_jsonl."""
    if folder.exists() and not folder.is_dir():
        raise InvalidInput(f"{folder} is a file: the Markdown export writes a folder, one file per persona")
    folder.mkdir(parents=True, exist_ok=True)
    with store.read() as s:
        by_persona: dict[str | None, list[int]] = {}
        for doc, _ in _memories(s, _ids(s, persona_id, scopes), with_atoms=False):
            by_persona.setdefault(doc.fields.persona_id, []).append(doc.id)
        for persona, ids in by_persona.items():
            with _replacing(folder / render.file_name(persona)) as out:
                out.write(render.head(persona, len(ids), now))
                for doc, atoms in _memories(s, ids, with_atoms):
                    out.write(render.section(doc, atoms))
    return {persona: len(ids) for persona, ids in by_persona.items()}


def _ids(s: Session, persona_id: str | None, scopes: Sequence[str | None] | None = None) -> list[int]:
    found: set[int] = set()
    for persona in (persona_id,) if scopes is None else scopes:
        found.update(s.documents.ids_in_scope(DocumentFilter(persona_id=persona, include_archived=True)))
    return sorted(found)


def _memories(s: Session, ids: Sequence[int], with_atoms: bool) -> Iterator[tuple[Document, list[dict] | None]]:
    """(memory, its atoms when asked) in id order; reads in chunks."""
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        docs = s.documents.get_many(chunk)
        for memory_id in chunk:
            if memory_id in docs:
                yield docs[memory_id], _atoms(s, memory_id) if with_atoms else None


def _atoms(s: Session, memory_id: int) -> list[dict]:
    """A memory's atoms, but not the provenance rows a reinforcement leaves (state dormant)."""
    return [jsonl.atom_record(row) for row in s.atoms.of_memory(memory_id) if row["state"] != "dormant"]


@contextmanager
def _replacing(path: Path) -> Iterator[TextIO]:
    """A text file written beside path and renamed onto it once complete and synced; its
    owner's only, as a backup is: an export holds the memories of every persona it covers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        with open(descriptor, "w", encoding="utf-8", newline="\n") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        raise InvalidInput(f"cannot write {path}: {exc.strerror or exc}: choose a writable place") from None
    finally:
        temporary.unlink(missing_ok=True)
