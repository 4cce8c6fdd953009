"""`aokun migrate --to OTHER.yaml`: copy this config's store into another config's store
(SQLite -> PostgreSQL and back), then check the copy.

The copy (migrate_copy.py) keeps everything a store holds (ids, times, pins, atoms, graph, vectors and their
change sequence, usage, users) through the store's Tables aggregate: every table page by page
in key order, each page one committed insert-if-absent in the target, then the full-text rows
from the source's index. A killed copy is finished by running the same command again: pages
already there are skipped, so nothing is copied twice. Process rows (workers, fronts, periodic
claims) stay behind: they describe processes of the source.

The target must be empty, or a copy of this very source: the source's store id is written in
the target before anything else, and a target holding rows under another id is refused, so
two stores are never merged; nor is a copy finished after either store was written since it
began (their recall epochs differ). Both stores must be idle (no live worker or front).

Then the check: rows per table and per full-text index equal, the same rows in each (a digest
of every row, engine-neutral), doctor finding the target as healthy as the source, and the
same top results for sample recalls (queries made from memories picked at random) through
each store's own recall. Exit 0 only when all agree; 1 when the copy differs; 2 when refused.
"""

from __future__ import annotations

import io
import re
import time
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from aokun_admin.health import cmd_doctor
from aokun_admin.migrate_copy import Copied, Digest, copy_store, fulltext_pages, fulltext_rows, pages
from shared.assembly import Services, open_services
from shared.config import AppConfig, load_config, require_config_file
from shared.errors import InvalidInput
from shared.search.recall import RecallRequest
from shared.store.interface import Store
from shared.store.model import meta
from shared.store.model.documents import DocumentFilter, unmarked
from shared.store.model.tables import FULLTEXT, REPLACED

DEFAULT_BATCH = 500
DEFAULT_SAMPLES = 20
QUERY_CHARS = 60


def add_parser(commands, with_config) -> None:
    """`aokun migrate`, on the admin CLI's subparsers."""
    migrate = with_config(commands.add_parser(
        "migrate", help="copy this store into another config's store (SQLite <-> PostgreSQL) and "
                        "check the copy; run it again to finish a copy that was interrupted"))
    migrate.add_argument("--to", type=Path, required=True, metavar="OTHER_CONFIG",
                         help="the config file of the target store (empty, or a copy of this one)")
    migrate.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                         help=f"rows per committed write (default {DEFAULT_BATCH})")
    migrate.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                         help=f"sample recalls compared on both stores (default {DEFAULT_SAMPLES})")


def cmd_migrate(admin, args) -> int:
    if args.batch < 1 or args.samples < 0:
        raise InvalidInput("--batch must be 1 or more and --samples 0 or more")
    target_config = load_config(args.to)
    require_config_file(target_config)
    source = admin.services
    target = open_services(target_config)
    try:
        prepare(source.store, admin.config, target.store, target_config)
        copied = copy_store(source.store, target.store, args.batch, args.samples)
        report = verify(Side("source", admin.config, source), Side("target", target_config, target),
                        copied, args.batch)
    finally:
        target.close()
    print(report.render())
    return 0 if report.verified else 1


# -- before copying ---------------------------------------------------------------------------

def prepare(source: Store, source_config: AppConfig, target: Store, target_config: AppConfig) -> None:
    """Refuse what would not be a copy (the same store, stores in use, a target holding
    another store's rows); mark the target as this source's copy."""
    if (source.engine, source.location) == (target.engine, target.location):
        raise InvalidInput(f"--to names this same store ({source.engine} at {source.location}); "
                           "give the config of another store")
    quiet(source, source_config, "source")
    quiet(target, target_config, "target")
    source_id = source.meta.ensure_store_id()
    rows = held_rows(target)
    if same_store_id(target.meta.store_id(), source_id):
        unchanged(source, target, rows)
        return  # a copy of this source begun before: finish it
    if rows:
        raise InvalidInput(f"the target store ({target.engine} at {target.location}) holds another "
                           f"store's rows ({rows}); migrate into an empty store. Nothing was copied")
    with target.write() as tx:  # committed before any row is copied: the mark of this copy
        tx.tables.clear_replaced()  # the empty target's own meta rows: the source's replace them
        tx.meta.put(meta.STORE_ID, source_id)


def held_rows(store: Store) -> str:
    """The rows a store holds beyond what an empty one has ('' when none), for messages."""
    held = {table: store.tables.count(table) for table in store.tables.names() if table not in REPLACED}
    return ", ".join(f"{table} {n}" for table, n in held.items() if n)


def unchanged(source: Store, target: Store, rows: str) -> None:
    """A copy is finished only from the source it began from: once rows were copied (meta
    first, so the target has the source's epoch), a write to either store since (a memory
    added, edited, embedded) moves one recall epoch and not the other."""
    ours, theirs = source.meta.recall_epoch(), target.meta.recall_epoch()
    if rows and ours != theirs:
        raise InvalidInput(f"the source or the target was written since this copy began (recall "
                           f"epoch {ours} here, {theirs} there): a copy would mix them. Migrate into "
                           "an empty store again. Nothing was copied")


def same_store_id(found: float | None, source_id: int) -> bool:
    """Whether the target carries the source's id (PostgreSQL keeps meta values as doubles:
    compared as the target keeps it)."""
    return found is not None and float(found) == float(source_id)


def quiet(store: Store, config: AppConfig, which: str) -> None:
    """A store written while it is copied would not be copied whole: no live worker or front."""
    alive_since = time.time() - config.worker.heartbeat_timeout_s
    workers, fronts = store.runtime.live_workers(alive_since), store.runtime.live_fronts(alive_since)
    if workers or fronts:
        raise InvalidInput(f"the {which} store ({store.engine} at {store.location}) is in use by "
                           f"{len(workers)} worker(s) and {len(fronts)} front(s): stop them (`aokun "
                           "stop`, and the servers) before migrating. Nothing was copied")


# -- the check ----------------------------------------------------------------------------------

@dataclass
class Side:
    name: str
    config: AppConfig
    services: Services

    @property
    def store(self) -> Store:
        return self.services.store


@dataclass
class Report:
    source: str
    target: str
    copied: Copied
    counts: list[tuple[str, int, int]]
    contents: list[tuple[str, bool]]
    doctors: list[tuple[str, int, list[str]]]
    recalls: list[tuple[str, list[int], list[int]]]
    k: int
    seconds: float

    @property
    def count_differences(self) -> list[tuple[str, int, int]]:
        return [c for c in self.counts if c[1] != c[2]]

    @property
    def content_differences(self) -> list[str]:
        return [name for name, same in self.contents if not same]

    @property
    def recall_differences(self) -> list[tuple[str, list[int], list[int]]]:
        return [r for r in self.recalls if r[1] != r[2]]

    @property
    def doctors_agree(self) -> bool:
        """The target is as healthy as the source: doctor finds as many problems in each (a
        copy of a store with stages still pending has them pending too)."""
        (_, code_a, said_a), (_, code_b, said_b) = self.doctors
        return code_a == code_b and problems(said_a) == problems(said_b)

    @property
    def verified(self) -> bool:
        return not (self.count_differences or self.content_differences
                    or self.recall_differences) and self.doctors_agree

    def render(self) -> str:
        lines = [f"migrated {self.source} -> {self.target}"]
        lines.append("copied: " + ", ".join(
            f"{t} {read} ({new} {'written' if t in REPLACED else 'new'})"
            for t, (read, new) in self.copied.tables.items()))
        lines.append("full text: " + ", ".join(f"{i} {read} ({new} new)" for i, (read, new) in
                                               self.copied.fulltext.items()))
        lines.append(f"copied in {self.copied.seconds:.1f} s, checked in {self.seconds:.1f} s")
        lines += self._count_lines() + self._doctor_lines() + self._recall_lines()
        lines.append("verified" if self.verified else "NOT verified: the copy differs (above)")
        return "\n".join(lines)

    def _count_lines(self) -> list[str]:
        wrong = self.count_differences
        head = f"counts: {len(self.counts) - len(wrong)} of {len(self.counts)} tables and indexes equal"
        lines = [head] + [f"  DIFFERENT {name}: source {a}, target {b}" for name, a, b in wrong]
        differ = self.content_differences
        lines.append(f"contents: {len(self.contents) - len(differ)} of {len(self.contents)} tables and "
                     "indexes hold the same rows")
        return lines + [f"  DIFFERENT {name}: rows differ from the source's" for name in differ]

    def _doctor_lines(self) -> list[str]:
        lines = []
        for name, _code, said in self.doctors:
            lines.append(f"doctor on the {name}: {said[-1] if said else '(no output)'}")
            lines += [f"  {line}" for line in said if line.startswith("PROBLEM")]
        if not self.doctors_agree:
            lines.append("  DIFFERENT: doctor does not find the target as healthy as the source")
        return lines

    def _recall_lines(self) -> list[str]:
        wrong = self.recall_differences
        head = (f"recall: {len(self.recalls) - len(wrong)} of {len(self.recalls)} sample queries "
                f"gave the same top {self.k} on both")
        return [head] + [f"  DIFFERENT {query!r}: source {a}, target {b}" for query, a, b in wrong]


def verify(source: Side, target: Side, copied: Copied, batch: int) -> Report:
    k, started = source.config.memory.recall_top_k, time.monotonic()
    found = digests(target.store, list(copied.tables), batch)
    report = Report(source=f"{source.store.engine} at {source.store.location}",
                    target=f"{target.store.engine} at {target.store.location}",
                    copied=copied, counts=compare_counts(source.store, target.store),
                    contents=[(name, found[name] == value) for name, value in copied.digests.items()],
                    doctors=[doctor(source), doctor(target)],
                    recalls=compare_recalls(source, target, copied.samples, k), k=k, seconds=0.0)
    report.seconds = time.monotonic() - started
    return report


def digests(store: Store, tables: list[str], batch: int) -> dict[str, int]:
    """Each table's and full-text index's Digest, read page by page as the copy read them."""
    found = {}
    for table in tables:
        digest = Digest()
        for rows in pages(store, table, batch):
            digest.add(rows)
        found[table] = digest.value
    for index in FULLTEXT:
        digest = Digest()
        for rows in fulltext_pages(store, index, batch):
            digest.add(fulltext_rows(rows))
        found[f"{index} full text"] = digest.value
    return found


def problems(said: list[str]) -> list[str]:
    """What kinds of problem doctor printed: each PROBLEM line up to its first clause, numbers
    left out (a count differs between two stores only if the copy does, which the counts
    check; an age differs anyway: the source's workers are not copied)."""
    kinds = [re.split(r"[,;(]", line, maxsplit=1)[0] for line in said if line.startswith("PROBLEM")]
    return sorted(re.sub(r"\d+", "N", kind).strip() for kind in kinds)


def compare_counts(source: Store, target: Store) -> list[tuple[str, int, int]]:
    """(table or index, rows in the source, rows in the target)."""
    counts = [(table, source.tables.count(table), target.tables.count(table))
              for table in source.tables.names()]
    counts += [(f"{index} full text", source.tables.fulltext_count(index),
                target.tables.fulltext_count(index)) for index in FULLTEXT]
    return counts


def doctor(side: Side) -> tuple[str, int, list[str]]:
    """`aokun doctor` on one store: (which, its exit status, what it printed)."""
    out = io.StringIO()
    with redirect_stdout(out):
        code = cmd_doctor(SimpleNamespace(store=side.store, config=side.config), None)
    return side.name, code, out.getvalue().splitlines()


def compare_recalls(source: Side, target: Side, samples: list[dict],
                    k: int) -> list[tuple[str, list[int], list[int]]]:
    """(query, source's top ids, target's top ids) for a query made from each sampled memory,
    in that memory's persona, through each store's own recall (its BM25, vectors, graph)."""
    found = []
    for sample in sorted(samples, key=lambda s: s["id"]):
        query = unmarked(sample["text"])[:QUERY_CHARS]
        request = RecallRequest(query=query, k=k, scope=DocumentFilter(persona_id=sample["persona_id"]))
        found.append((query, top_ids(source, request), top_ids(target, request)))
    return found


def top_ids(side: Side, request: RecallRequest) -> list[int]:
    return [hit.document.id for hit in side.services.recaller.recall(request)]
