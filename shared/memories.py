"""The memory service: the one way to write a memory, for every entry point.

MCP tools, the admin CLI, the panel and importers all go through it. The write protocol:
1. compute what can be computed outside the lock (stored text, index terms);
2. one BEGIN IMMEDIATE transaction: the document, its BM25 row and its stage rows (or, for an
   edit, the old version read and replaced, and the stages reset only if the text changed);
3. after the commit, queue the stages for the workers. If queueing fails the memory is safe
   anyway: the failure is logged, the rows are marked not queued, and the reconciler queues
   them (at every front and worker start, and every queue.reconcile_interval_s).
Deleting cascades over every aggregate in one transaction and returns a receipt per table.

The service checks what it is given (shared/memory_rules.py: content, fields, ids, edits) and
refuses with InvalidInput, so every entry point gets the same answer for the same input; a
change by id checks, inside its transaction, that the caller's principal holds the memory's
persona (shared/access.py; the admin's by default: the CLI, the panel, importers). The
upkeep jobs (shared/lifecycle.py) change importance and the archived flag through it too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import tzinfo
from typing import Protocol

from shared import memory_rules as rules
from shared.access import ADMIN, Principal, check_persona, owned_memory
from shared.atom_life import TtlFor, retract
from shared.decay import decayed_importance
from shared.errors import InvalidInput
from shared.extract.atomize import ttl_days
from shared.live_config import LiveConfig
from shared.logs import RateLimitedWarnings
from shared.store import backups_holding
from shared.store.interface import Session, Store
from shared.store.model import meta
from shared.store.model.documents import Document, History, MemoryFields, content_hash, epoch, stored_text, unmarked
from shared.store.model.fulltext import FTS_TABLES
from shared.store.model.stages import STAGES, StageKey
from shared.text.segment import Segmenter
from shared.time_zone import on_clock, user_zone
from shared.units import DAY

log = logging.getLogger("aokun.memories")
# A queue that is away fails every write: one line a minute says so, not one per memory.
_queue_warnings = RateLimitedWarnings(log)

# Fields the atoms and graph stages read besides the text: changing one redoes the stages.
DERIVED_FIELDS = frozenset({"key_facts", "participants", "topics", "persona_summary"})



class DeleteReceipt(dict):
    """{table: rows removed} by a delete, and `backups_holding`: the names of the backup files
    (in the backups folder) that still hold the deleted memory."""

    def __init__(self, removed: dict[str, int], backups_holding: Sequence[str] = ()):
        super().__init__(removed)
        self.backups_holding = list(backups_holding)


class StageQueue(Protocol):
    def enqueue(self, keys: Sequence[StageKey], delay_s: float = 0.0) -> int: ...


class MemoryService:
    """Writes memories; reads go to the store itself (service.store.documents)."""

    def __init__(self, store: Store, segmenter: Segmenter, queue: StageQueue | None,
                 live: LiveConfig, *, clock: Callable[[], float] = time.time,
                 ttl_for: TtlFor | None = None):
        self.store = store
        self.live = live  # memory.* and atoms.ttl_* are read when a memory is written
        self.segmenter = segmenter
        self.queue = queue
        self.ttl_for = ttl_for or _live_ttl_days(live)
        self.clock = clock

    # -- the rules ----------------------------------------------------------------------------

    def checked(self, content: str, fields: MemoryFields) -> tuple[str, MemoryFields]:
        """A new memory's content and fields as the service would store them, or InvalidInput
        (the length limit is server.max_content_chars as the process reads it now)."""
        content = rules.check_content(content, self.live.now.server.max_content_chars)
        fields = rules.check_fields(fields)
        if fields.original_time is not None:
            fields = replace(fields, original_time=on_clock(fields.original_time, self.zone()))
        return content, fields

    def zone(self) -> tzinfo:
        """The user's clock (memory.time_zone, read now): a time without an offset is read on
        it, and a memory without one is marked with its stored time on it."""
        return user_zone(self.live.now.memory.time_zone)

    # -- writes -------------------------------------------------------------------------------

    def memorize(self, content: str, fields: MemoryFields) -> Document:
        """Store a new memory with its stage rows in one transaction, then queue its stages
        (once per source when fields.source_hash is set, as memorize_once)."""
        return self.memorize_once(content, fields)[0]

    def memorize_once(self, content: str, fields: MemoryFields,
                      history: History | None = None) -> tuple[Document, bool]:
        """memorize, unless a memory was already made from fields.source_hash: then that one.
        Returns (memory, created). The check and the insert are one transaction, so two
        callers with the same source store it once. With a history (an import), the memory
        keeps the times, archived flag and accesses it had where it came from, and its
        conversation context is found at its creation time; its stages are queued now."""
        content, fields = self.checked(content, fields)
        now = self.clock()
        stored = history.create_time if history is not None else now
        text = stored_text(content, fields.original_time, stored, self.zone())
        tokens = self.index_tokens(text, fields)
        with self.store.write() as tx:
            existing = tx.documents.find_by_source(fields.source_hash) if fields.source_hash else None
            if existing is not None:
                return tx.documents.get(existing), False
            memory_id = self._insert(tx, text, tokens, fields, now, stored)
            if history is not None:
                tx.documents.set_history(memory_id, history)
            doc = tx.documents.get(memory_id)
        self._submit([doc])
        return doc, True

    def memorize_many(self, items: Sequence[tuple[str, MemoryFields]]) -> list[int]:
        """Many memories in one transaction (seeding: benchmarks, tests); return their ids."""
        now = self.clock()
        prepared = []
        for content, fields in items:
            content, fields = self.checked(content, fields)
            text = stored_text(content, fields.original_time, now, self.zone())
            prepared.append((text, self.index_tokens(text, fields), fields))
        with self.store.write() as tx:
            ids = [self._insert(tx, text, tokens, fields, now) for text, tokens, fields in prepared]
        self._submit_keys([StageKey(i, stage, content_hash(text))
                           for i, (text, _, _) in zip(ids, prepared) for stage in STAGES])
        return ids

    def edit(self, memory_id: int, content: str | None, changes: dict,
             principal: Principal = ADMIN) -> Document:
        """Replace content and/or some fields, re-indexed in the same transaction. The old
        version is read inside that transaction, so two edits never both see the same base."""
        rules.check_memory_id(memory_id)
        if content is not None:
            content = rules.check_content(content, self.live.now.server.max_content_chars)
        changes = rules.check_changes(changes)
        if changes.get("original_time") is not None:
            changes["original_time"] = on_clock(changes["original_time"], self.zone())
        if content is None and not changes:
            raise InvalidInput("nothing to change: give content and/or metadata")
        if "persona_id" in changes:
            check_persona(principal, changes["persona_id"])
        with self.store.write() as tx:
            old = owned_memory(principal, memory_id, tx.documents.get, _persona_of)
            fields = replace(old.fields, **changes)
            now = self.clock()
            text = self._edited_text(old, content, fields, "original_time" in changes)
            # A memory moved to another persona or session leaves its conversation: the words
            # it lent its neighbours' rows, and took from theirs, go with it.
            moved = (fields.persona_id, fields.session_id) != (old.fields.persona_id, old.fields.session_id)
            left = tx.neighbours.unlink(memory_id) if moved else []
            tx.documents.update(memory_id, text, self.index_tokens(text, fields), fields, now,
                                self._context_terms(tx, memory_id))
            text_changed = content_hash(text) != old.content_hash
            carriers = left if moved else tx.neighbours.dependents(memory_id) if text_changed else []
            carried = self._refresh_carriers(tx, carriers)
            scrub = text_changed and tx.fts.scrubs_in_place()
            if text_changed or moved:
                # The vector of the old text or context is stale (a recall must not find it meanwhile).
                tx.vectors.delete_for_memory(memory_id, now, kind="document")
            if scrub:
                # The old words leave the index now where that is cheap; elsewhere (a full
                # index rewrite, ~0.5 s at 100k memories) the worker's hourly upkeep does it.
                tx.fts.scrub_terms(["documents_fts"])
            # Atoms and graph output are of one persona and session too (the store hides or
            # drops the old ones at once: shared/store/portable/atoms.py, sqlite/documents.py).
            redo = text_changed or moved or bool(DERIVED_FIELDS & changes.keys())
            if redo:
                tx.stages.reset_for_memory(memory_id, content_hash(text), now)
            doc = tx.documents.get(memory_id)
        if scrub:
            self.store.flush_deleted()
        if redo:
            self._submit([doc])
        self._submit_keys(carried)
        return doc

    def set_pinned(self, memory_id: int, pinned: bool, principal: Principal = ADMIN) -> Document:
        rules.check_memory_id(memory_id)
        rules.check_field("pinned", pinned)
        with self.store.write() as tx:
            owned_memory(principal, memory_id, tx.documents.get, _persona_of)
            tx.documents.set_pinned(memory_id, pinned, self.clock())
            return tx.documents.get(memory_id)

    def delete(self, memory_id: int, principal: Principal = ADMIN) -> DeleteReceipt:
        """Delete a memory and everything derived from it; return {table: rows removed}, with
        `backups_holding`: the backup files that still hold it (they keep it until they age
        out). Its words leave the full-text indexes and the WAL too (shared/store/sqlite/fts.py)."""
        rules.check_memory_id(memory_id)
        with self.store.write() as tx:
            doc = owned_memory(principal, memory_id, tx.documents.get, _persona_of)
            now = self.clock()
            receipt = dict(tx.vectors.delete_for_memory(memory_id, now))
            receipt.update(tx.graph.delete_for_memory(memory_id))
            retract(tx, memory_id, self.ttl_for, now)
            receipt.update(tx.atoms.delete_for_memory(memory_id))
            receipt.update(tx.stages.delete_for_memory(memory_id, now))
            carriers = tx.neighbours.unlink(memory_id)
            receipt.update(tx.documents.delete(memory_id))
            carried = self._refresh_carriers(tx, carriers)
            tx.fts.scrub_terms([table for table in FTS_TABLES if receipt.get(table)])
        self.store.flush_deleted()
        self._submit_keys(carried)
        holding = backups_holding(self.live.now.backup_dir, memory_id, doc.content_hash,
                                  doc.create_time)
        return DeleteReceipt(receipt, backups_holding=holding)

    def touch(self, ids: Sequence[int], now: float) -> None:
        """Access reinforcement for recalled memories."""
        if ids:
            with self.store.write() as tx:
                tx.documents.touch(ids, now)

    # -- upkeep (shared/lifecycle.py decides when) ---------------------------------------------

    def apply_decay(self, days: int, forgetting, now: float, applied_at: float) -> int:
        """`days` daily importance decays of every unpinned memory (shared/decay.py; one
        recalled within forgetting.access_decay_window_days decays more slowly), with
        `applied_at` recorded as the last decay in the same transaction, so none is applied
        twice. Returns how many memories decayed."""
        window_start = now - forgetting.access_decay_window_days * DAY
        with self.store.write() as tx:
            updates = []
            for memory_id, importance, accesses, last_access in tx.documents.decay_inputs():
                recent = last_access is not None and last_access >= window_start
                for _ in range(days):
                    importance, accesses = decayed_importance(
                        importance, accesses, recent, forgetting.decay_rate,
                        forgetting.access_count_decay_multiplier)
                updates.append((importance, accesses, memory_id))
            tx.documents.set_decayed(updates)
            tx.meta.put(meta.DECAY_APPLIED_AT, applied_at)
        return len(updates)

    def archive_stale(self, created_before: float, importance_below: float) -> list[int]:
        """Archive the unpinned memories created before a time and less important than a
        level (they leave recall); return their ids."""
        with self.store.write() as tx:
            return tx.documents.archive_stale(created_before, importance_below)

    # -- repair ---------------------------------------------------------------------------------

    def retry_failed(self) -> int:
        """Failed stages get a fresh set of attempts and are queued (aokun repair --apply)."""
        with self.store.write() as tx:
            retried = tx.stages.retry_failed(self.clock())
        self.queue_ready()
        return retried

    def redo_missing(self, missing: dict[str, list[int]]) -> int:
        """Stages whose output is missing run again (aokun repair --apply)."""
        with self.store.write() as tx:
            redone = tx.consistency.redo_missing(missing, self.clock())
        self.queue_ready()
        return redone

    def queue_ready(self) -> int:
        """Queue every due pending stage that nothing has queued; return how many."""
        now = self.clock()
        keys = self.store.stages.ready_to_enqueue(now, include_enqueued=False)
        if not keys or not self._submit_keys(keys):
            return 0
        with self.store.write() as tx:
            tx.stages.mark_enqueued(keys, now)
        return len(keys)

    def backfill_fts(self, batch: int = 500) -> int:
        """Give every document without a BM25 row its row back, with its context (after
        migration 7 or 8 that is every document); return how many. In batches, each checked
        again inside its transaction: a front and a worker may back-fill at once."""
        restored = 0
        missing = self.store.documents.missing_fts()
        for start in range(0, len(missing), batch):
            with self.store.write() as tx:
                for doc in tx.documents.get_many(missing[start:start + batch]).values():
                    if tx.documents.has_fts_row(doc.id):
                        continue
                    context = self._context(tx, doc.text, doc.fields, doc.create_time, before_id=doc.id)
                    tx.neighbours.link(doc.id, [i for i, _ in context])
                    tx.documents.add_fts_row(doc.id, self.index_tokens(doc.text, doc.fields),
                                             self._terms_of(context), doc.fields)
                    restored += 1
        return restored

    # -- helpers ------------------------------------------------------------------------------

    def index_tokens(self, text: str, fields: MemoryFields) -> str:
        """The BM25 terms of a memory: its text, topics, persona summary and the key facts
        the text does not already hold. Participants stay out: every memory of a
        conversation names both speakers, so they only blur the ranking."""
        extra = [*fields.topics, fields.persona_summary or ""]
        extra += [fact for fact in fields.key_facts if fact.strip() not in text]
        return " ".join(self.segmenter.terms("\n".join([text, *extra])))

    def _context(self, tx: Session, text: str, fields: MemoryFields, stored_time: float,
                 before_id: int | None = None) -> list[tuple[int, str]]:
        """(id, text) of the neighbours a memory is indexed with (shared/store/portable/neighbours.py)."""
        moment = epoch(fields.original_time) or stored_time
        settings = self.live.now.memory
        return tx.neighbours.before(fields.persona_id, fields.session_id, moment,
                                    settings.context_turns, settings.context_window_s, before_id,
                                    fields.participants, text)

    def _terms_of(self, context: Sequence[tuple[int, str]]) -> str:
        """BM25 terms of neighbours' texts, oldest first, without their time markers (the
        memory's own marker already carries its time)."""
        texts = [unmarked(text) for _, text in reversed(context)]
        return " ".join(self.segmenter.terms("\n".join(texts))) if texts else ""

    def _context_terms(self, tx: Session, memory_id: int) -> str:
        return self._terms_of(tx.neighbours.of(memory_id))

    def _refresh_carriers(self, tx: Session, carriers: Sequence[int]) -> list[StageKey]:
        """Memories whose context held a changed or deleted memory: their context terms are
        rebuilt from the neighbours they still have, and their vectors (embedded with the
        old context) are dropped and made again. Returns the embed stages to queue."""
        now = self.clock()
        keys = []
        for carrier in carriers:
            tx.documents.set_context(carrier, self._context_terms(tx, carrier))
            tx.vectors.delete_for_memory(carrier, now, kind="document")
            version = tx.documents.get(carrier).content_hash
            tx.stages.restart(carrier, "embed", version, now)
            keys.append(StageKey(carrier, "embed", version))
        return keys

    def _insert(self, tx: Session, text: str, tokens: str, fields: MemoryFields, now: float,
                stored: float | None = None) -> int:
        """A new memory with its stage rows; `stored` is when it was stored, if not now (an
        import), which is where its conversation context is looked for."""
        context = self._context(tx, text, fields, now if stored is None else stored)
        memory_id = tx.documents.insert(text, tokens, fields, now, self._terms_of(context))
        tx.neighbours.link(memory_id, [i for i, _ in context])
        tx.stages.create_for_memory(memory_id, content_hash(text), now)
        if self.queue is None:
            # Nothing will queue it now: leave it to the reconciler.
            tx.stages.mark_enqueued([StageKey(memory_id, s, content_hash(text)) for s in STAGES], None)
        return memory_id

    def _edited_text(self, old: Document, content: str | None, fields: MemoryFields,
                     time_changed: bool) -> str:
        if content is not None:
            return stored_text(content, fields.original_time, old.create_time, self.zone())
        if time_changed:
            return stored_text(unmarked(old.text), fields.original_time, old.create_time, self.zone())
        return old.text

    def _submit(self, docs: Sequence[Document]) -> None:
        self._submit_keys([StageKey(d.id, stage, d.content_hash) for d in docs for stage in STAGES])

    def _submit_keys(self, keys: list[StageKey]) -> bool:
        """Queue stages after their commit; True if queued. Never raises: the rows are the
        truth, and what could not be queued is left to the reconciler."""
        if self.queue is None or not keys:
            return False
        try:
            self.queue.enqueue(keys)
            _queue_warnings.clear()
            return True
        except Exception as exc:
            _queue_warnings.warning(str(exc), "could not queue %d stage(s) (the reconciler will): %s",
                                    len(keys), exc)
            try:
                with self.store.write() as tx:
                    tx.stages.mark_enqueued(keys, None)
            except Exception:
                log.exception("could not record the failed queueing; the reconciler's full pass"
                              " will queue them")
            return False


def _persona_of(doc: Document) -> str | None:
    return doc.fields.persona_id


def _live_ttl_days(live: LiveConfig) -> Callable[[str, float, int], float]:
    """An atom's shelf life from the atoms.ttl_* keys current when it is computed."""
    return lambda atom_type, importance, reinforcements: ttl_days(
        atom_type, importance, reinforcements, live.now.atoms)
