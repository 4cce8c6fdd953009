"""The copy of `aokun migrate` (aokun_admin/migrate.py): every table of the source, page by
page in key order, each page one committed insert-if-absent in the target through the store's
Tables aggregate, then the full-text rows as the source's index holds them. Pages already in
the target are skipped, so a killed copy run again copies nothing twice. On the way, each
table's Digest (what the check compares) and a random sample of memories (the recall check's
queries) are taken from the pages read: the source is read once.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from shared.errors import StorageError
from shared.store.interface import Store
from shared.store.model.tables import FULLTEXT, LATE_REFERENCES, key_of

# Lazy imports: tqdm loads only when a copy starts (the CLI's other commands never need it).

SAMPLE_SEED = 22  # the same memories are sampled by a re-run of one copy


@dataclass
class Copied:
    """What one run copied: per table (rows read, rows new in the target), per full-text
    index the same, the digest of each as read from the source, and the memories sampled
    for the recall check."""

    tables: dict[str, tuple[int, int]] = field(default_factory=dict)
    fulltext: dict[str, tuple[int, int]] = field(default_factory=dict)
    digests: dict[str, int] = field(default_factory=dict)
    samples: list[dict] = field(default_factory=list)
    seconds: float = 0.0


def copy_store(source: Store, target: Store, batch: int, samples: int) -> Copied:
    """Every table, then every full-text index, then the target's ids moved past the copied
    ones; the source's digests and sampled memories taken on the way (no second read)."""
    copied, started = Copied(), time.monotonic()
    sampler = Reservoir(samples, random.Random(SAMPLE_SEED))
    present = set(target.tables.names())
    for table in source.tables.names():
        if table not in present:
            raise StorageError(f"the target store has no {table} table: open it once with this "
                               "Aokun version (its migrations add it) and run migrate again")
        digest = Digest()
        watchers = [digest.add, sampler.offer] if table == "documents" else [digest.add]
        copied.tables[table] = copy_table(source, target, table, batch, watchers)
        copied.digests[table] = digest.value
    for index in FULLTEXT:
        digest = Digest()
        copied.fulltext[index] = copy_fulltext(source, target, index, batch, digest.add)
        copied.digests[f"{index} full text"] = digest.value
    target.tables.finish()
    copied.samples, copied.seconds = sampler.chosen, time.monotonic() - started
    return copied


def copy_table(source: Store, target: Store, table: str, batch: int,
               watchers: list[Callable[[list], None]]) -> tuple[int, int]:
    """Every row of one table, a committed page at a time, each page shown to the watchers;
    (rows read, rows inserted)."""
    read = inserted = 0
    late = False
    with progress(table, source.tables.count(table)) as bar:
        for rows in pages(source, table, batch):
            inserted += put_page(target, table, rows)
            read += len(rows)
            late = late or has_late_reference(table, rows)
            for watch in watchers:
                watch(rows)
            bar.update(len(rows))
    if late:
        # A reference to a row of a later page was left unset; every row is there now.
        with progress(f"{table} (links)", read) as bar:
            for rows in pages(source, table, batch):
                put_page(target, table, rows)
                bar.update(len(rows))
    return read, inserted


def put_page(target: Store, table: str, rows: list) -> int:
    """One page into the target (rows inserted). When the target refuses it, a value its
    engine cannot keep is looked for in the page and named: a NUL character, which SQLite
    keeps and PostgreSQL's text cannot, in memory 12's text."""
    try:
        return target.tables.put(table, rows)
    except StorageError as exc:
        holder = nul_holder(table, rows)
        if holder is None:
            raise
        raise StorageError(
            f"{holder} holds a NUL character (U+0000), which the target store ({target.engine})"
            " cannot keep: remove it in the source (edit_memory, or the panel) and run migrate"
            " again, which goes on from this page", exc.kind) from exc


def nul_holder(table: str, rows: list) -> str | None:
    """The first value of the page holding a NUL character, as a person finds it ("memory 12's
    text", "memory 12's memory_atoms row (31,) text"), or None."""
    for row in rows:
        values = dict(row)
        for column, value in values.items():
            if isinstance(value, str) and "\x00" in value:
                if table == "documents":
                    return f"memory {values['id']}'s {column}"
                place = f"{table} row {key_of(table, row)}"
                owner = values.get("memory_id")
                return f"memory {owner}'s {place} {column}" if owner is not None else f"{place} {column}"
    return None


def pages(store: Store, table: str, batch: int) -> Iterator[list]:
    """A table's rows, a page at a time, in key order."""
    after = None
    while True:
        rows = store.tables.page(table, after, batch)
        if rows:
            yield rows
        if len(rows) < batch:
            return
        after = key_of(table, rows[-1])


def has_late_reference(table: str, rows: list) -> bool:
    late = LATE_REFERENCES.get(table)
    return late is not None and any(row[late[0]] is not None for row in rows)


def copy_fulltext(source: Store, target: Store, index: str, batch: int,
                  watch: Callable[[list], None]) -> tuple[int, int]:
    """One full-text index's rows, as the source holds them; (rows read, rows added)."""
    read = added = 0
    with progress(f"{index} full text", source.tables.fulltext_count(index)) as bar:
        for rows in fulltext_pages(source, index, batch):
            added += target.tables.fulltext_put(index, rows)
            read += len(rows)
            watch(fulltext_rows(rows))
            bar.update(len(rows))
    return read, added


def fulltext_rows(rows: list) -> list[tuple]:
    """(row id, column texts...) as both engines keep them (a NULL column is indexed as '')."""
    return [(row_id, *("" if text is None else text for text in columns)) for row_id, columns in rows]


def fulltext_pages(store: Store, index: str, batch: int) -> Iterator[list]:
    after = None
    while True:
        rows, after = store.tables.fulltext_page(index, after, batch)
        if rows:
            yield rows
        if after is None:
            return


def progress(what: str, total: int):
    """Rows copied of a table, on stderr when it is a terminal; none into a log or a pipe
    (disable=None: tqdm's own test of the stream)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=what, unit="row", file=sys.stderr, mininterval=0.5, leave=True,
                disable=None)


class Reservoir:
    """Up to `size` memories picked uniformly at random from all those offered (one pass)."""

    def __init__(self, size: int, rng: random.Random):
        self.size, self.rng, self.offered = size, rng, 0
        self.chosen: list[dict] = []

    def offer(self, rows: list) -> None:
        for row in rows:
            self.offered += 1
            picked = {"id": row["id"], "text": row["text"], "persona_id": row["persona_id"]}
            if len(self.chosen) < self.size:
                self.chosen.append(picked)
            else:
                slot = self.rng.randrange(self.offered)
                if slot < self.size:
                    self.chosen[slot] = picked


class Digest:
    """What a table holds, whatever its engine or row order: the sum of a hash of each row,
    each value as both engines give it back (a number as a float: PostgreSQL's doubles,
    SQLite's integers; bytes as hex)."""

    def __init__(self):
        self.value = 0

    def add(self, rows: list) -> None:
        for row in rows:
            items = sorted(dict(row).items()) if hasattr(row, "keys") else list(enumerate(row))
            text = json.dumps([(name, _plain(value)) for name, value in items], ensure_ascii=False)
            digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
            self.value = (self.value + int.from_bytes(digest, "big")) % (1 << 64)


def _plain(value):
    """A value as both engines give it back (see Digest)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, bytes, memoryview)):
        return value
    return float(value) if isinstance(value, (int, float)) else bytes(value).hex()
