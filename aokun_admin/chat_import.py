"""`aokun import` of a chat export (ChatGPT's or Claude's conversations.json): each conversation
summarized into one memory, as `aokun ingest` summarizes a transcript.

- Read an item at a time (shared/transfer/json_array.py): an export of tens of MB is never
  held whole; the progress bar counts its bytes and the conversations done.
- Once each: a conversation's source is its id and its last update time, hashed with the
  persona into source_hash. Whether it is stored is asked before it is summarized (summarizing
  is what costs), and memorize_once checks again in the transaction that stores it. A
  conversation continued after an import is another version: imported again as a memory of
  its own, the earlier one kept.
- Resumable: the byte offset of the next conversation is kept (shared/transfer/position.py)
  after each one is done, so a run after a kill goes straight there.
- A bad conversation (wrong shape, no messages, text that is no UTF-8, a time out of range)
  is reported on one line, with its number, title and id, and skipped.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from aokun_admin.import_end import QueueAsYouGo, finish_import
from aokun_admin.ingest import ingest_persona
from shared.errors import AokunError, InvalidInput
from shared.summarize.transcript_lines import MAX_FILE_BYTES, to_summarize
from shared.summarize.transcripts import dated, in_range, memory_fields, storable
from shared.time_zone import user_zone
from shared.transfer import chats
from shared.transfer.importer import ImportCounts
from shared.transfer.json_array import NotAnArray, array_items
from shared.transfer.position import Position
from shared.transfer.rows import BadRow, source_hash


def cmd_import_chats(admin, args, fmt: str) -> int:
    """Import every conversation of the export once; exit 1 when some were skipped."""
    from tqdm import tqdm

    path: Path = args.file
    persona = ingest_persona(admin, args.persona)
    size = path.stat().st_size
    bar = tqdm(total=size, unit="B", unit_scale=True, file=sys.stderr,
               disable=not (args.progress or sys.stderr.isatty()))

    def report(where: str, problem: str, skipped: bool = True) -> None:
        tqdm.write(f"aokun import: {where}: {problem}" + ("; skipped" if skipped else ""), file=sys.stderr)

    position = Position(admin.config.storage.data_dir, path, f"{fmt}\n{persona or ''}",
                        lambda message: report(str(path), message, skipped=False))
    start, done = position.load()
    if start:
        print(f"resuming after conversation {done}, where an earlier import of {path.name} stopped "
              "(the conversations before it are done)")
        bar.update(start)
    conversations = Conversations(admin, fmt, persona, report)
    queueing = QueueAsYouGo(admin)
    try:
        with bar, _opened(path) as handle:
            for item in array_items(handle, start, done, MAX_FILE_BYTES, bar.update):
                if item.problem is not None:
                    conversations.counts.skipped += 1
                    report(f"{path.name} conversation {item.index + 1} (from byte {item.end})",
                           f"{item.problem}: the rest of the file cannot be read")
                    break
                conversations.add(chats.where(path.name, item.index, item.value), item.value)
                position.save(item.end, item.index + 1)
                queueing.tick()
                bar.set_postfix_str(f"{item.index + 1} conversations", refresh=False)
    except NotAnArray as exc:
        raise InvalidInput(f"{path} is no {chats.ASSISTANTS[fmt]} conversations.json ({exc}): "
                           "a JSON array of conversations is expected") from None
    except AokunError:
        print(f"{conversations.counts.summary()} before stopping; run the import again to continue "
              "(conversations already imported are not imported twice)")
        raise
    position.clear()
    counts = conversations.counts
    total = counts.imported + counts.present + counts.skipped
    finish_import(admin, counts.imported)
    print(f"{counts.summary()} ({total} conversations, {fmt}, from {path})")
    return 1 if counts.skipped else 0


class Conversations:
    """Conversations summarized and memorized once each, bad ones reported."""

    def __init__(self, admin, fmt: str, persona: str | None, report):
        self.fmt, self.persona, self.report = fmt, persona, report
        self.store = admin.store
        self.summarizer = admin.services.summarizer
        # Stages are queued every few seconds and at the end (aokun_admin/import_end.py).
        self.service = admin.memories(queued=False)
        self.zone = user_zone(admin.config.memory.time_zone)
        self.counts = ImportCounts()

    def add(self, where: str, item: object) -> None:
        found = chats.conversation(self.fmt, item, where)
        if isinstance(found, BadRow):
            return self._skip(found.where, found.problem)
        updated = found.updated.isoformat() if found.updated else ""
        hashed = source_hash(self.persona, f"{self.fmt} conversation\n{found.id}\n{updated}")
        if self.store.documents.find_by_source(hashed) is not None:
            self.counts.present += 1
            return
        try:
            content, fields = self._memory(found, hashed)
            _, created = self.service.memorize_once(content, fields)
        except InvalidInput as exc:
            return self._skip(where, str(exc))
        except (ValueError, OverflowError, RecursionError) as exc:  # a value no rule foresaw
            return self._skip(where, f"cannot be stored as given ({type(exc).__name__}: "
                                     f"{' '.join(str(exc)[:240].split())[:120]})")
        if created:
            self.counts.imported += 1
        else:
            self.counts.present += 1

    def _memory(self, found: chats.Conversation, hashed: str):
        """The memory's text and fields: the title (with the assistant's name) over the summary;
        the summary's topics, people and key facts; the conversation's start as its time."""
        turns = storable(found.turns, found.where, lambda message: self.report(found.where, message, False))
        turns = in_range(dated(turns, found.created or found.updated, self.zone), found.where)
        summarized, limited = to_summarize(turns)
        for warning in limited:
            self.report(found.where, warning, skipped=False)
        memory = self.summarizer.summarize(summarized)
        for warning in memory.warnings:
            self.report(found.where, warning, skipped=False)
        fields = memory_fields(memory, turns, self.persona, f"{self.fmt}-{found.id}")
        started = found.created or next((t.time for t in turns if t.time is not None), None)
        fields = replace(fields, source_hash=hashed, original_time=started)
        heading = f"{found.title} ({found.assistant})" if found.title else f"{found.assistant} conversation"
        return f"{heading}\n{memory.summary}", fields

    def _skip(self, where: str, problem: str) -> None:
        self.counts.skipped += 1
        self.report(where, problem)


def _opened(path: Path):
    try:
        return path.open("rb")
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
