"""Rows written through the memory service, each exactly once.

Every row is one memorize_once: its check for the row's source_hash and its insert are one
transaction, so a row is stored once however often the file is imported, and an import killed
at any point and run again stores each row exactly once (the rows before the kill are found,
the rest written). A bad row — one the memory service refuses, by the rules it applies to every memory
(shared/memory_rules.py) — is reported with where it is and skipped; a storage failure
(disk full, database locked) stops the import, which a re-run then continues.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from shared.errors import InvalidInput
from shared.memory_rules import fields_from_metadata
from shared.store.model.documents import Document, History, MemoryFields, content_hash
from shared.transfer.rows import BadRow, Row, source_hash


class Service(Protocol):
    """What an import needs of the memory service (shared.memories.MemoryService)."""

    def checked(self, content: str, fields: MemoryFields) -> tuple[str, MemoryFields]: ...

    def memorize_once(self, content: str, fields: MemoryFields,
                      history: History | None = None) -> tuple[Document, bool]: ...


@dataclass
class ImportCounts:
    imported: int = 0
    present: int = 0
    skipped: int = 0

    def summary(self) -> str:
        return f"imported {self.imported}, already present {self.present}, skipped {self.skipped}"


class Importer:
    """Imports rows for one persona (or each row's own), reporting bad rows as it goes."""

    def __init__(self, service: Service, report: Callable[[str, str], None],
                 persona_id: str | None = None, lookup: Callable[[int], Document | None] | None = None):
        self.service = service
        self.report = report
        self.persona_id = persona_id
        self.lookup = lookup
        self.counts = ImportCounts()

    def run(self, items: Iterable[Row | BadRow], advance: Callable[[int], object] = lambda n: None) -> ImportCounts:
        for item in items:
            self.add(item)
            advance(1)
        return self.counts

    def add(self, item: Row | BadRow) -> None:
        if isinstance(item, BadRow):
            return self._skip(item.where, item.problem)
        metadata = dict(item.metadata)
        if self.persona_id is not None:
            metadata["persona_id"] = self.persona_id
        try:  # the service's rules, before the row is looked up (the same answer for every row)
            content, fields = self.service.checked(item.content, fields_from_metadata(metadata))
        except InvalidInput as exc:
            return self._skip(item.where, str(exc))
        except (ValueError, OverflowError, RecursionError) as exc:  # a value no rule foresaw
            return self._skip(item.where, f"cannot be stored as given ({type(exc).__name__}: "
                                          f"{' '.join(str(exc)[:240].split())[:120]})")
        if self._already_here(item, content, fields):
            self.counts.present += 1
            return
        fields = replace(fields, source_hash=self._source_hash(item, fields.persona_id))
        _, created = self.service.memorize_once(content, fields, item.history)
        if created:
            self.counts.imported += 1
        else:
            self.counts.present += 1

    def _source_hash(self, item: Row, persona_id: str | None) -> str:
        """The row's own source_hash (a transcript's) while it stays in its persona; else the
        hash of what the row is, for the persona it goes to."""
        if item.source_hash and persona_id == item.metadata.get("persona_id"):
            return item.source_hash
        return source_hash(persona_id, item.source)

    def _already_here(self, item: Row, content: str, fields: MemoryFields) -> bool:
        """An export imported back into its own store: the memory it came from is still here
        (same id, text, persona and creation time), though it has no source_hash to find."""
        if self.lookup is None or item.origin_id is None or item.history is None:
            return False
        doc = self.lookup(item.origin_id)
        return (doc is not None and doc.content_hash == content_hash(content.strip())
                and doc.fields.persona_id == fields.persona_id
                and doc.create_time == item.history.create_time)

    def _skip(self, where: str, problem: str) -> None:
        self.counts.skipped += 1
        self.report(where, problem)
