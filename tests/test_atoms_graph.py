"""Atoms and the knowledge graph, built by the worker's stages (run in this process) from
memories stored through MCP."""

from __future__ import annotations

import json
import re
import time

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import WorkerHere, all_processed, db_rows, front_in_process, write_config
from shared.assembly import open_services
from shared.atom_life import store_atoms
from shared.config import AppConfig, AtomsConfig, StorageConfig
from shared.extract.graph_rules import canonical
from shared.store.model.atoms import AtomOwner, AtomRow
from shared.store.model.documents import MemoryFields


@pytest.fixture
def system(tmp_path):
    """A config on a fake embeddings API, an MCP session on the real front and the worker's
    runner in this process."""
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(
            tmp_path, embedding={"provider": "openai", "base_url": api.base_url, "model": "fake",
                                 "dimensions": 32},
            queue={"retry_base_s": 0.2}, graph={"aliases": ["Bobby=Bob"]},
            server={"exposed_tools": ["memorize", "recall", "search_atoms", "edit_memory",
                                      "delete_memory"]})
        worker = WorkerHere(config)
        try:
            with front_in_process(config) as session:
                yield session, config, worker
        finally:
            worker.close()


def settle(worker: WorkerHere, count: int) -> None:
    """What a worker does with the memories waiting, done here: then `count` are processed."""
    worker.run_every_stage()
    assert all_processed(worker.config, count)


@pytest.mark.slow
def test_atoms_and_graph_shape_of_a_memory(system):
    s, config, worker = system
    mid = s.ok("memorize", {"content": "Alice 是 Bob 的同事，她们每天一起吃午饭。",
                            "metadata": {"topics": ["工作"], "persona_id": "p"}})["id"]
    settle(worker, 1)
    assert db_rows(config, "SELECT type, state FROM memory_atoms WHERE memory_id = ?",
                   (mid,)) == [("relational", "active")]
    nodes = set(db_rows(config, "SELECT type, canonical FROM graph_nodes"))
    assert {("person", "alice"), ("person", "bob"), ("topic", "工作")} <= nodes
    assert ("fact", canonical("Alice 是 Bob 的同事，她们每天一起吃午饭。", {})) in nodes
    edges = db_rows(config, "SELECT s.canonical, e.type, d.type FROM graph_edges e JOIN graph_nodes s"
                            " ON s.id = e.src_node_id JOIN graph_nodes d ON d.id = e.dst_node_id")
    assert ("alice", "describes", "fact") in edges and ("bob", "describes", "fact") in edges
    assert any(t == "co_occurs_with" for _, t, _ in edges)
    entries = db_rows(config, "SELECT text FROM graph_entries WHERE source_memory_id = ?", (mid,))
    # The summary is the stored text, with its time marker (here the creation time).
    assert len(entries) == 1 and re.fullmatch(
        r"Fact: Alice 是 Bob 的同事，她们每天一起吃午饭。 "
        r"Summary: \[[-\d :]+\] Alice 是 Bob 的同事，她们每天一起吃午饭。",
        entries[0][0])
    assert db_rows(config, "SELECT COUNT(*) FROM vectors WHERE kind = 'graph_entry'") == [(1,)]


@pytest.mark.slow
@pytest.mark.parametrize("memory, query", [
    ("Alice 和 Bob 上周一起去爬了黄山", "Alice 和 Bob 是什么关系"),
    ("Alice and Bobby started a small bakery together last spring",
     "what is the relationship between Alice and Bob"),
])
def test_relationship_question_found_through_the_graph(system, memory, query):
    s, _, worker = system
    mid = s.ok("memorize", {"content": memory})["id"]
    # A distractor sharing no word with the question: the fake embedder's vectors are bags of
    # words, so shared function words ("the", "and") would decide a near tie between the two.
    s.ok("memorize", {"content": "cold rain fell all week long"})
    settle(worker, 2)
    hit = s.ok("recall", {"query": query, "explain": True})["results"][0]
    assert hit["id"] == mid
    assert "graph_keyword" in hit["explain"]["channels"]
    assert "relational" in hit["explain"]["parts"]["routes"]["intents"]


@pytest.mark.slow
@pytest.mark.parametrize("first, again", [
    ("I really love green tea", "I love green tea"),
    ("我很喜欢喝绿茶", "我喜欢喝绿茶"),
])
def test_reinforcement_instead_of_a_duplicate(system, first, again):
    s, config, worker = system
    s.ok("memorize", {"content": first, "metadata": {"persona_id": "u1"}})
    settle(worker, 1)
    s.ok("memorize", {"content": again, "metadata": {"persona_id": "u1"}})
    settle(worker, 2)
    rows = db_rows(config, "SELECT id, type, reinforcement_count, ttl_days FROM memory_atoms WHERE state = 'active'")
    assert len(rows) == 1 and rows[0][1] == "preference" and rows[0][2] == 1
    assert rows[0][3] == pytest.approx(60 * 1.0 * 1.5)
    # The second memory keeps only a dormant provenance row pointing at the reinforced atom.
    assert db_rows(config, "SELECT superseded_by FROM memory_atoms WHERE state = 'dormant'") == [(rows[0][0],)]
    # Another persona's identical fact is its own atom.
    s.ok("memorize", {"content": again, "metadata": {"persona_id": "u2"}})
    settle(worker, 3)
    assert len(db_rows(config, "SELECT id FROM memory_atoms WHERE state = 'active'")) == 2


@pytest.mark.slow
@pytest.mark.parametrize("old, new, value", [
    ("我住在北京", "我现在住在上海", "上海"),
    ("My favourite drink is coffee", "my favourite drink is tea now", "tea"),
])
def test_superseding_keeps_the_old_atom_linked(system, old, new, value):
    s, config, worker = system
    s.ok("memorize", {"content": old, "metadata": {"persona_id": "u1"}})
    settle(worker, 1)
    s.ok("memorize", {"content": new, "metadata": {"persona_id": "u1"}})
    settle(worker, 2)
    rows = db_rows(config, "SELECT id, state, superseded_by, value FROM memory_atoms ORDER BY id")
    assert len(rows) == 2
    (_old_id, old_state, link, _), (new_id, new_state, _, new_value) = rows
    assert (old_state, link, new_state, new_value) == ("superseded", new_id, "active", value)
    found = s.ok("search_atoms", {"query": new, "persona_id": "u1"})["atoms"]
    assert [a["id"] for a in found] == [new_id]  # active atoms only


@pytest.mark.slow
def test_search_atoms_filters_and_expired_plans(system):
    s, _, worker = system
    s.ok("memorize", {"content": "明天上午十点去医院复查", "metadata": {"persona_id": "u1",
                                                            "original_time": "2020-01-01T09:00:00"}})
    s.ok("memorize", {"content": "I have a dentist appointment tomorrow", "metadata": {"persona_id": "u1"}})
    s.ok("memorize", {"content": "I love hiking in the mountains", "metadata": {"persona_id": "u2"}})
    settle(worker, 3)
    planned = s.ok("search_atoms", {"query": "dentist appointment", "types": ["planned"]})["atoms"]
    assert len(planned) == 1 and planned[0]["type"] == "planned" and planned[0]["deadline"]
    assert s.ok("search_atoms", {"query": "医院复查"})["atoms"] == []  # its deadline passed in 2020
    assert s.ok("search_atoms", {"query": "hiking", "persona_id": "u1"})["atoms"] == []
    assert s.ok("search_atoms", {"query": "hiking", "persona_id": "u2"})["atoms"][0]["type"] == "preference"
    assert "types" in s.error("search_atoms", {"query": "x", "types": ["dream"]})


@pytest.mark.slow
def test_edit_rebuilds_the_graph(system):
    s, config, worker = system
    mid = s.ok("memorize", {"content": "Carol mentors Dave at work"})["id"]
    settle(worker, 1)
    s.ok("edit_memory", {"id": mid, "content": "Erin mentors Frank at work"})
    settle(worker, 1)
    people = {c for (c,) in db_rows(config, "SELECT canonical FROM graph_nodes WHERE type = 'person'")}
    assert people == {"erin", "frank"}
    assert len(db_rows(config, "SELECT id FROM graph_entries")) == 1


def test_entity_resolution():
    aliases = {"Bobby": "Bob"}
    assert canonical("Ａｌｉｃｅ", aliases) == canonical(" alice ", aliases) == "alice"
    assert canonical("Bobby", aliases) == canonical("BOB", aliases) == "bob"
    assert canonical("Mary  Ann", aliases) == "mary ann"


def test_batch_insert_falls_back_row_by_row(tmp_path):
    services = open_services(AppConfig(storage=StorageConfig(data_dir=tmp_path)), queued=False)
    doc = services.memories.memorize("two facts", MemoryFields(persona_id="p"))
    owner = AtomOwner(doc.id, "p", None, 0.5, doc.content_hash)
    rows = [AtomRow("factual", "I live in Oslo", "live oslo", 0.8),
            AtomRow("dream", "a row that breaks the type check", "row break", 0.5),
            AtomRow("preference", "I like skiing", "like ski", 0.7)]
    with services.store.write() as tx:
        outcome = store_atoms(tx, owner, rows, lambda *a: 30.0, 0.6, time.time())
    assert (outcome.inserted, outcome.needs_repair) == (2, 1)
    stored = services.store.atoms.of_memory(doc.id)
    assert [(r["type"], r["needs_repair"]) for r in stored] == [("factual", 0), ("unknown", 1), ("preference", 0)]
    services.close()


def test_ttl_config_defaults():
    config = AtomsConfig()
    assert [config.base_ttl_days(t) for t in ("episodic", "planned", "factual", "relational",
                                               "preference", "unknown")] == [7, 2, 180, 90, 60, 30]


def rerun_stage(worker: WorkerHere, memory_id: int, stage: str) -> None:
    """Set a done stage back to pending (as a repair would) and run it again."""
    import sqlite3

    conn = sqlite3.connect(worker.config.parent / "data" / "aokun.db")
    with conn:
        conn.execute("UPDATE memory_stages SET status = 'pending', attempts = 0, enqueued_time = NULL"
                     " WHERE memory_id = ? AND stage = ?", (memory_id, stage))
    conn.close()
    worker.run_every_stage()


@pytest.mark.slow
def test_stages_are_idempotent_and_a_delete_takes_back_what_a_memory_did(system):
    s, config, worker = system
    fact = "I really love hiking in the mountains every weekend"
    first = s.ok("memorize", {"content": fact, "metadata": {"persona_id": "u1"}})["id"]
    settle(worker, 1)
    second = s.ok("memorize", {"content": fact, "metadata": {"persona_id": "u1"}})["id"]
    settle(worker, 2)
    count = lambda: db_rows(config, "SELECT reinforcement_count FROM memory_atoms WHERE memory_id = ?"  # noqa: E731
                                    " AND state = 'active'", (first,))[0][0]
    assert count() == 1
    for _ in range(2):  # the atoms stage of the reinforcing memory runs again: still one
        rerun_stage(worker, second, "atoms")
        assert db_rows(config, "SELECT status FROM memory_stages WHERE memory_id = ?"
                               " AND stage = 'atoms'", (second,)) == [("done",)]
        assert count() == 1
    s.ok("delete_memory", {"id": second})
    assert count() == 0

    old = s.ok("memorize", {"content": "我住在北京", "metadata": {"persona_id": "u2"}})["id"]
    settle(worker, 2)
    new = s.ok("memorize", {"content": "我现在住在上海", "metadata": {"persona_id": "u2"}})["id"]
    settle(worker, 3)
    state = lambda: db_rows(config, "SELECT state FROM memory_atoms WHERE memory_id = ?", (old,))[0][0]  # noqa: E731
    assert state() == "superseded"
    s.ok("delete_memory", {"id": new})
    assert state() == "active"  # what superseded it is gone


@pytest.mark.slow
def test_graph_is_built_from_the_stored_atoms_with_one_node_per_name(system):
    s, config, worker = system
    a = s.ok("memorize", {"content": "Alice went to Paris for a conference last spring",
                          "metadata": {"persona_id": "p", "participants": ["Alice"]}})["id"]
    b = s.ok("memorize", {"content": "She bought fresh bread at the market on Sunday morning",
                          "metadata": {"persona_id": "p", "participants": ["ALICE"]}})["id"]
    settle(worker, 2)
    people = db_rows(config, "SELECT canonical, forms FROM graph_nodes WHERE type = 'person' AND canonical = 'alice'")
    assert len(people) == 1 and people[0][0] == "alice"
    assert sorted(json.loads(people[0][1])) == ["ALICE", "Alice"]
    # Every entry names the stored atom it was made from.
    for memory_id in (a, b):
        atom_ids = {r[0] for r in db_rows(config, "SELECT id FROM memory_atoms WHERE memory_id = ?", (memory_id,))}
        entry_atoms = {r[0] for r in db_rows(config, "SELECT atom_id FROM graph_entries"
                                                     " WHERE source_memory_id = ?", (memory_id,))}
        assert atom_ids and entry_atoms == atom_ids
