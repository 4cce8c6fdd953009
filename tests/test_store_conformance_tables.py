"""Store conformance (tests/store_conformance.py): the Tables aggregate, every table's rows as
they are, which `aokun migrate` copies a store to another with. Each test copies between two
stores of the fixture's engine (the copy across engines: tests/process/test_migrate.py)."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from shared.errors import StorageError
from shared.store import open_store
from shared.store.model.atoms import AtomOwner, AtomRow
from shared.store.model.documents import DocumentFilter
from shared.store.model.record import Record
from shared.store.model.tables import FULLTEXT, key_of
from store_conformance import ALL, NOW, add, opened, storage_for, store  # noqa: F401 (the fixtures)


@pytest.fixture
def other(store, tmp_path):
    """A second, empty store of the same engine: where a copy goes."""
    with ExitStack() as resources:
        second = open_store(storage_for(store.engine, tmp_path / "other", resources))
        resources.callback(second.close)
        yield second


def copy(source, target, table: str, limit: int = 2) -> int:
    """Every row of a table, `limit` rows a page; how many the target took."""
    taken, after = 0, None
    while rows := source.tables.page(table, after, limit):
        taken += target.tables.put(table, rows)
        after = key_of(table, rows[-1])
    return taken


def copy_fulltext(source, target, index: str, limit: int = 2) -> int:
    added, after = 0, None
    while True:
        rows, after = source.tables.fulltext_page(index, after, limit)
        added += target.tables.fulltext_put(index, rows)
        if after is None:
            return added


def atom(store, memory_id: int, value: str, persona: str = "p") -> int:
    doc = store.documents.get(memory_id)
    owner = AtomOwner(memory_id, persona, None, 0.5, doc.content_hash)
    return store.atoms.insert(owner, AtomRow("factual", f"tea is {value}", f"tea is {value}", 0.9,
                                             "tea", "is", value), NOW)


def test_the_copied_tables_are_listed_in_copy_order_without_process_rows(store):
    names = store.tables.names()
    assert names[:3] == ["meta", "documents", "memory_stages"]
    assert names.index("graph_nodes") < names.index("graph_edges") < names.index("graph_entries")
    assert {"vectors", "vector_tombstones", "memory_context", "llm_usage", "periodic_runs", "users"} <= set(names)
    assert not {"workers", "fronts", "periodic_claims"} & set(names)


def test_pages_walk_every_row_once_in_key_order(store):
    ids = [add(store, f"memory number {i}") for i in range(7)]
    seen, after = [], None
    while rows := store.tables.page("memory_stages", after, 3):
        assert len(rows) <= 3
        seen += [key_of("memory_stages", row) for row in rows]
        after = key_of("memory_stages", rows[-1])
    assert seen == sorted(seen) and len(seen) == len(set(seen)) == 3 * len(ids)
    assert store.tables.count("memory_stages") == 21 and store.tables.count("documents") == 7
    assert [r["id"] for r in store.tables.page("documents", (ids[4],), 10)] == ids[5:]


def test_a_copy_keeps_ids_and_every_column_and_takes_each_row_once(store, other):
    first = add(store, "kept as it was", persona_id="p", session_id="s", importance=0.9, pinned=True)
    store.documents.delete(add(store, "a gap in the ids"))
    last = add(store, "after the gap", persona_id="q")
    assert copy(store, other, "documents") == 2
    assert copy(store, other, "memory_stages") == 6
    for memory_id in (first, last):
        assert other.documents.get(memory_id) == store.documents.get(memory_id)
        assert other.stages.of_memory(memory_id) == store.stages.of_memory(memory_id)
    assert copy(store, other, "documents") == 0 and copy(store, other, "memory_stages") == 0, \
        "a second copy finds every row there"
    assert other.tables.count("documents") == 2


def test_copied_meta_values_replace_the_targets_own(store, other):
    store.meta.put("vector_seq", 41)
    store_id = store.meta.ensure_store_id()
    other.meta.put("vector_seq", 3)
    copy(store, other, "meta")
    assert other.meta.get("vector_seq") == 41
    assert float(other.meta.store_id()) == float(store_id)


def test_a_reference_to_a_later_row_is_set_once_that_row_is_there(store, other):
    memory_id = add(store, "tea", persona_id="p")
    old, new = atom(store, memory_id, "green"), atom(store, memory_id, "black")
    assert store.atoms.supersede("p", "tea", "is", "black", new, NOW + 1) == 1
    copy(store, other, "documents")
    copy(store, other, "memory_atoms", limit=1)  # the superseded atom's page comes first
    copy(store, other, "memory_atoms", limit=1)  # the second pass, as aokun migrate makes it
    rows = {r["id"]: dict(r) for r in other.atoms.of_memory(memory_id)}
    assert rows[old]["superseded_by"] == new and rows[old]["state"] == "superseded"
    assert rows == {r["id"]: dict(r) for r in store.atoms.of_memory(memory_id)}


def test_full_text_rows_are_copied_and_rank_as_in_the_source(store, other):
    ids = [add(store, text, context="before", persona_id="p") for text in
           ("apples and pears", "pears only", "apples apples apples", "nothing here")]
    memory_id = ids[0]
    atom(store, memory_id, "green")
    copy(store, other, "documents")
    copy(store, other, "memory_atoms")
    assert [copy_fulltext(store, other, index) for index in FULLTEXT] == [4, 1, 0]
    assert [copy_fulltext(store, other, index) for index in FULLTEXT] == [0, 0, 0], "each row once"
    for index in FULLTEXT:
        assert other.tables.fulltext_count(index) == store.tables.fulltext_count(index)
    scope = DocumentFilter(persona_id="p")
    terms = ["apples", "before"]
    assert other.documents.bm25(terms, scope, 10) == store.documents.bm25(terms, scope, 10)
    assert other.documents.terms_of(ids) == store.documents.terms_of(ids)
    assert [r["id"] for r in other.atoms.search(["green"], "p", None, None, 5)] == \
        [r["id"] for r in store.atoms.search(["green"], "p", None, None, 5)]


def test_a_full_text_row_is_added_only_for_a_row_that_is_there(store, other):
    add(store, "orphan words")
    rows, _ = store.tables.fulltext_page("documents", None, 10)
    assert other.tables.fulltext_put("documents", rows) == 0
    assert other.tables.fulltext_count("documents") == 0


def test_after_a_copy_new_rows_take_ids_past_the_copied_ones(store, other):
    ids = [add(store, f"memory {i}") for i in range(3)]
    copy(store, other, "documents")
    other.tables.finish()
    assert add(other, "written after the copy") == ids[-1] + 1
    assert other.documents.list(10, 0, ALL)[1] == 4


def test_a_column_the_target_lacks_is_refused_and_nothing_written(store):
    row = Record.kind(("key", "value", "colour"))(("vector_seq", 5, "red"))
    with pytest.raises(StorageError, match="colour"):
        store.tables.put("meta", [row])
    assert store.meta.get("vector_seq") != 5
    with pytest.raises(ValueError):
        store.tables.count("workers")


def test_clearing_an_empty_stores_own_bookkeeping_leaves_its_data(store):
    memory_id = add(store, "kept")
    store.meta.put("vector_seq", 9)
    store.runtime.claim_periodic_run("decay", 60.0, NOW, "me", 1, "host", 30.0)
    store.runtime.finish_periodic_run("decay", "me", NOW)
    assert store.tables.count("periodic_runs") == 1
    assert store.tables.clear_replaced() >= 2
    assert store.tables.count("meta") == 0 and store.tables.count("periodic_runs") == 0
    assert store.documents.get(memory_id).text == "kept"
