"""Store conformance (tests/store_conformance.py): transactions, snapshots, sessions, rows,
and the documents with their BM25 index."""

from __future__ import annotations

import inspect
import threading
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from shared.errors import MemoryNotFound, StorageError
from shared.store import interface, open_store
from shared.store.model.documents import DocumentFilter, History, MemoryFields
from shared.store.model.graph import EdgeSpec, MemoryGraph, NodeSpec
from store_conformance import ALL, NOW, add, in_threads, opened, store  # noqa: F401 (the fixtures)

# -- transactions ------------------------------------------------------------------------


def test_a_committed_write_and_its_stage_rows_are_seen_by_another_thread(store):
    memory_id = add(store, "Alice moved to Lyon")
    doc, rows = in_threads(lambda: (store.documents.get(memory_id), store.stages.of_memory(memory_id)))[0]
    assert doc.text == "Alice moved to Lyon"
    assert [(r["stage"], r["status"]) for r in rows] \
        == [("embed", "pending"), ("atoms", "pending"), ("graph", "pending")]


def test_an_error_inside_write_leaves_nothing(store):
    epoch = store.meta.recall_epoch()
    with pytest.raises(RuntimeError, match="crash"):
        with store.write() as tx:
            memory_id = tx.documents.insert("half written", "half written", MemoryFields(), NOW)
            tx.stages.create_for_memory(memory_id, "h", NOW)
            raise RuntimeError("crash between the writes")
    assert store.documents.count() == 0
    assert store.stages.queue_figures(NOW)["pending"] == 0
    assert store.meta.recall_epoch() == epoch


def test_a_failed_statement_is_a_storage_error_and_nothing_is_stored(store):
    with pytest.raises(StorageError, match="nothing was stored"):
        with store.write() as tx:
            tx.documents.insert("kept only with its stages", "kept", MemoryFields(), NOW)
            tx.stages.create_for_memory(999, "h", NOW)  # no memory 999
    assert store.documents.count() == 0


def test_read_is_one_snapshot_while_another_thread_commits(store):
    add(store, "first")
    opened, committed = threading.Event(), threading.Event()

    def reader():
        with store.read() as s:
            before = s.documents.count()
            opened.set()
            committed.wait(10)
            return before, s.documents.count(), len(s.documents.list(10, 0, ALL)[0])

    def writer():
        opened.wait(10)
        add(store, "second")
        committed.set()

    (counts, _) = in_threads(reader, writer)
    assert counts == (1, 1, 1)
    assert store.documents.count() == 2


def test_a_read_session_cannot_write(store):
    with pytest.raises(StorageError):
        with store.read() as s:
            s.documents.insert("sneaked in", "sneaked", MemoryFields(), NOW)
    assert store.documents.count() == 0


def test_a_savepoint_undoes_only_its_own_writes(store):
    with store.write() as tx:
        kept = tx.documents.insert("kept", "kept", MemoryFields(), NOW)
        with pytest.raises(StorageError):
            with tx.savepoint("one_row"):
                tx.documents.insert("undone", "undone", MemoryFields(), NOW)
                tx.stages.create_for_memory(999, "h", NOW)
        assert tx.transaction_alive()
    assert store.documents.count() == 1 and store.documents.get(kept).text == "kept"


def test_calls_on_the_store_are_transactions_of_their_own_or_join_the_open_one(store):
    memory_id = store.documents.insert("stored by one call", "stored", MemoryFields(), NOW)
    assert in_threads(lambda: store.documents.get(memory_id).text)[0] == "stored by one call"
    with store.write() as tx:
        tx.documents.set_pinned(memory_id, True, NOW)
        assert store.documents.get(memory_id).fields.pinned  # the thread's own transaction
        assert not in_threads(lambda: store.documents.get(memory_id).fields.pinned)[0]
    assert store.documents.get(memory_id).fields.pinned


def test_a_call_on_the_store_that_fails_halfway_leaves_nothing(store):
    memory_id = add(store, "Alice in Lyon")
    alice, lyon = NodeSpec("person", "Alice", "alice"), NodeSpec("place", "Lyon", "lyon")
    bad = MemoryGraph([alice, lyon], [EdgeSpec(alice, lyon, "no_such_edge_type", 0.5)], [])
    with pytest.raises(StorageError):
        store.graph.replace_for_memory(memory_id, "p", bad, "h", NOW)  # nodes first, then the edge
    assert store.graph.table_counts()["graph_nodes"] == 0


def test_the_store_says_what_and_where_it_is(store):
    assert store.engine in ("sqlite", "postgresql")
    assert isinstance(store.location, str) and store.location
    assert Path(store.cache_dir).is_dir()
    assert isinstance(store.incarnation(), int)


def test_rows_are_records_read_by_name_and_by_position(store):
    memory_id = add(store, "a memory")
    row = store.stages.of_memory(memory_id)[0]
    assert isinstance(row, interface.Record) and isinstance(row, tuple)
    assert row["stage"] == row[0] == row.stage == "embed"
    assert dict(row)["status"] == "pending" and "content_hash" in row.keys()
    stage, status, *_ = row
    assert (stage, status) == ("embed", "pending")


def test_every_interface_method_is_there_with_its_arguments(store):
    for name, protocol in interface.Session.__annotations__.items():
        protocol, aggregate = getattr(interface, protocol), getattr(store, name)
        for method in [m for m, v in vars(protocol).items() if callable(v) and not m.startswith("_")]:
            wanted = list(inspect.signature(getattr(protocol, method)).parameters)[1:]
            assert list(inspect.signature(getattr(aggregate, method)).parameters) == wanted, f"{name}.{method}"


# -- documents ---------------------------------------------------------------------------


def test_documents_insert_get_and_get_many(store):
    fields = MemoryFields(topics=("moving",), participants=("Alice",), key_facts=("Alice lives in Lyon",),
                          importance=0.8, persona_id="p", session_id="s", source_hash="src1")
    memory_id = add(store, "Alice moved to Lyon", **vars(fields))
    doc = store.documents.get(memory_id)
    assert (doc.text, doc.fields, doc.archived, doc.create_time) == ("Alice moved to Lyon", fields, False, NOW)
    assert list(store.documents.get_many([memory_id, 999])) == [memory_id]
    assert store.documents.find_by_source("src1") == memory_id and store.documents.find_by_source("x") is None
    with pytest.raises(MemoryNotFound):
        store.documents.get(999)


def test_documents_update_replaces_text_fields_and_search_terms(store):
    memory_id = add(store, "tea in Kyoto")
    with store.write() as tx:
        tx.documents.update(memory_id, "coffee in Rome", "coffee in rome", MemoryFields(importance=0.9), NOW + 1)
    doc = store.documents.get(memory_id)
    assert (doc.text, doc.fields.importance, doc.update_time) == ("coffee in Rome", 0.9, NOW + 1)
    assert store.documents.bm25(["kyoto"], ALL, 5) == []
    assert [i for i, _ in store.documents.bm25(["rome"], ALL, 5)] == [memory_id]
    assert store.documents.terms_of([memory_id]) == {memory_id: ["coffee", "in", "rome"]}


def test_documents_delete_gives_a_receipt_and_its_words_leave_the_index(store):
    memory_id, other = add(store, "secret plum", stages=False), add(store, "plain plum", stages=False)
    with store.write() as tx:
        receipt = tx.documents.delete(memory_id)
        tx.fts.scrub_terms(["documents_fts"])
    assert receipt == {"documents": 1, "documents_fts": 1}
    assert store.flush_deleted() is True
    assert store.documents.bm25(["secret"], ALL, 5) == []
    assert [i for i, _ in store.documents.bm25(["plum"], ALL, 5)] == [other]
    assert not store.documents.has_fts_row(memory_id) and store.documents.has_fts_row(other)
    assert store.documents.missing_fts() == [] and store.documents.get_many([memory_id]) == {}


def test_statistics_are_refreshed_by_housekeeping_and_not_by_every_delete(opened):
    """refresh_statistics (the worker's hourly housekeeping) brings the planner's statistics up
    to date, where autovacuum may be off; flush_deleted, in every delete's reply, does not pay
    for that (on PostgreSQL: VACUUM without ANALYZE, ~90 ms instead of ~1 s at 100k)."""
    store, storage = opened
    for i in range(3):
        add(store, f"note {i} about plums", stages=False)

    def analyzed() -> int:
        # Lazy imports: psycopg only for the PostgreSQL store.
        import psycopg

        with psycopg.connect(storage.url) as conn:
            return conn.execute("SELECT COUNT(*) FROM pg_stats WHERE schemaname = 'public'"
                                " AND tablename = 'documents'").fetchone()[0]

    assert store.flush_deleted() is True
    if store.engine == "postgresql":
        assert analyzed() == 0
    assert store.refresh_statistics() is True
    if store.engine == "postgresql":
        assert analyzed() > 0
    assert [i for i, _ in store.documents.bm25(["plums"], ALL, 5)]  # the store works on


def test_documents_list_pages_newest_first_with_the_total(store):
    ids = [add(store, f"memory {n}") for n in range(5)]
    page, total = store.documents.list(2, 1, ALL)
    assert total == 5 and [d.id for d in page] == [ids[3], ids[2]]


def test_document_filters_scope_by_persona_session_time_and_archived(store):
    day = lambda d: datetime(2024, 1, d, tzinfo=timezone.utc)  # noqa: E731
    a = add(store, "a", persona_id="p", session_id="s1", original_time=day(1))
    b = add(store, "b", persona_id="p", session_id="s2", original_time=day(5))
    c = add(store, "c", persona_id="q", original_time=day(5))
    with store.write() as tx:
        tx.documents.set_history(b, History(create_time=NOW, update_time=NOW, archived=True))
    assert store.documents.ids_in_scope(DocumentFilter(persona_id="p")) == [a]
    assert sorted(store.documents.ids_in_scope(DocumentFilter(persona_id="p", include_archived=True))) == [a, b]
    assert store.documents.count_in(DocumentFilter(session_id="s2", include_archived=True)) == 1
    since = DocumentFilter(since=day(3).timestamp(), include_archived=True)
    assert store.documents.filter_ids([a, b, c, 999], since) == {b, c}
    assert store.documents.count_in(DocumentFilter(until=day(2).timestamp())) == 1
    assert [d.id for d in store.documents.list(10, 0, DocumentFilter(persona_id="q"))[0]] == [c]


def test_documents_list_by_state_and_persona_ids(store):
    ids = [add(store, f"m{n}", persona_id=p) for n, p in enumerate(["p", "q", "p"])]
    with store.write() as tx:
        tx.documents.set_pinned(ids[0], True, NOW)
        tx.documents.set_history(ids[1], History(NOW, NOW, archived=True))
    state = lambda s, cap=100: store.documents.list_by_state(DocumentFilter(), s, 10, 0, cap)  # noqa: E731
    assert [[d.id for d in state(s)[0]] for s in ("active", "pinned", "archived")] == [
        [ids[2], ids[0]], [ids[0]], [ids[1]]]
    assert state("all")[1] == 3 and state("all", cap=2)[1] == 2
    assert store.documents.persona_ids(10) == ["p", "q"]


def test_bm25_ranks_only_the_scope_persona_and_session(store):
    mine = add(store, "hiking boots", persona_id="p", session_id="s")
    add(store, "hiking trip", persona_id="q")
    other_session = add(store, "hiking map", persona_id="p", session_id="t")
    assert [i for i, _ in store.documents.bm25(["hiking"], DocumentFilter(persona_id="p", session_id="s"), 5)] == [mine]
    assert {i for i, _ in store.documents.bm25(["hiking"], DocumentFilter(persona_id="p"), 5)} == {mine, other_session}
    assert store.documents.bm25([], ALL, 5) == []


def test_bm25_context_words_count_by_the_context_weight(store):
    own = add(store, "apple pie recipe")
    carried = add(store, "yes with the kids", context="apple orchard")
    unweighted = dict(store.documents.bm25(["apple"], ALL, 5, context_weight=0.0))
    assert unweighted[carried] == 0 < unweighted[own]
    assert [i for i, _ in store.documents.bm25(["apple"], ALL, 5, context_weight=5.0)] == [carried, own]
    with store.write() as tx:
        tx.documents.set_context(carried, "")
    assert [i for i, _ in store.documents.bm25(["apple"], ALL, 5)] == [own]


def test_documents_touch_decay_archive_and_stats(store):
    old, pinned = add(store, "old note", importance=0.1), add(store, "pinned", pinned=True)
    with store.write() as tx:
        tx.documents.touch([old], NOW + 5)
    assert (store.documents.get(old).access_count, store.documents.get(old).last_access_time) == (1, NOW + 5)
    assert [tuple(r) for r in store.documents.decay_inputs()] == [(old, 0.1, 1, NOW + 5)]
    with store.write() as tx:
        tx.documents.set_decayed([(0.05, 1, old)])
        archived = tx.documents.archive_stale(created_before=NOW + 1, importance_below=0.06)
    assert archived == [old] and store.documents.get(old).fields.importance == 0.05
    assert store.documents.stats() == {"total": 2, "pinned": 1, "archived": 1, "active": 1}
    assert store.documents.get(pinned).archived is False


def test_a_writer_waits_for_another_up_to_the_busy_timeout_then_is_refused_in_one_line(opened):
    """Writers take turns (SQLite's write lock, PostgreSQL's advisory lock); one kept waiting
    past storage.busy_timeout_ms gets a StorageError of kind "locked", and the store goes on."""
    store, storage = opened
    impatient = open_store(replace(storage, busy_timeout_ms=300))
    held, release = threading.Event(), threading.Event()

    def hold():
        with store.write() as tx:
            tx.meta.put("decay_applied_at", 1.0)
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        with pytest.raises(StorageError) as refused:
            with impatient.write() as tx:
                tx.meta.put("decay_applied_at", 2.0)
        assert refused.value.kind == "locked" and "\n" not in str(refused.value)
    finally:
        release.set()
        holder.join()
    with impatient.write() as tx:  # the lock is free again: the same store writes
        tx.meta.put("decay_applied_at", 3.0)
    assert store.meta.get("decay_applied_at") == 3
    impatient.close()


def test_reads_inside_reading_work_and_nest(store):
    """store.reading() may share one snapshot among a thread's calls (PostgreSQL), or cost
    nothing (SQLite); either way calls and nested read sessions inside it work."""
    memory_id = add(store, "read inside a shared snapshot")
    with store.reading():
        assert store.documents.get(memory_id).text == "read inside a shared snapshot"
        with store.read() as s:
            assert s.documents.count() == 1
        with store.reading():
            assert store.documents.count() == 1
    with store.write() as tx:  # the thread's transaction is over: writes work again
        tx.documents.set_pinned(memory_id, True, NOW)
    assert store.documents.get(memory_id).fields.pinned
