"""Store conformance (tests/store_conformance.py): what the worker derives from a memory:
the graph, atoms, vectors and their change sequence; full-text scrubbing and backups."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shared.store.model.atoms import AtomOwner, AtomRow
from shared.store.model.documents import DocumentFilter
from shared.store.model.graph import EdgeSpec, EntrySpec, MemoryGraph, NodeSpec
from shared.store.model.vectors import PASSAGE_SLOTS, VectorRow, passage_of, passage_owner
from store_conformance import DAY, NOW, add, opened, store  # noqa: F401 (the fixtures)

# -- graph -------------------------------------------------------------------------------

ALICE, LYON = NodeSpec("person", "Alice", "alice"), NodeSpec("place", "Lyon", "lyon")
BOB, FACT = NodeSpec("person", "Bob", "bob"), NodeSpec("fact", "Alice lives in Lyon", "alice lives in lyon")


def graph_of(atom_id: int | None = None) -> MemoryGraph:
    return MemoryGraph(nodes=[ALICE, LYON, BOB],
                       edges=[EdgeSpec(ALICE, LYON, "co_occurs_with", 0.9, 2.0),
                              EdgeSpec(ALICE, BOB, "relation", 0.8, relation="husband"),
                              EdgeSpec(FACT, ALICE, "describes", 0.7)],
                       entries=[EntrySpec("Fact: Alice lives in Lyon", "alice lives lyon", FACT, 0.7, atom_id)])


def test_graph_replace_and_recall_reads(store):
    memory_id = add(store, "Alice lives in Lyon with her husband Bob", persona_id="p")
    with store.write() as tx:
        [entry] = tx.graph.replace_for_memory(memory_id, "p", graph_of(), "h", NOW)
    alice, lyon, bob = (store.graph.nodes_named([n], "p", 5)[0] for n in ("alice", "lyon", "bob"))
    assert store.graph.entity_nodes_named(["alice", "alice lives in lyon"], "p") == {"alice": [alice]}
    assert store.graph.nodes_named(["alice"], "q", 5) == []
    assert store.graph.neighbours([lyon], 5) == [alice]
    assert store.graph.related([alice], ["husband"], [], 5) == [(bob, 0.8)]
    assert {(n, m) for n, m, _ in store.graph.memories_of_nodes([lyon], 5)} == {(lyon, memory_id)}
    assert store.graph.node_memory_counts([alice, 999], 10) == {alice: 1, 999: 0}
    [hit] = store.graph.search_entries(["lyon"], "p", 5)
    assert (hit[0], hit[1], hit[3]) == (entry, memory_id, 0.7)
    assert store.graph.entries_memories([entry]) == {entry: (memory_id, 0.7)}
    assert store.graph.entry_nodes([entry]) == store.graph.nodes_named(["alice lives in lyon"], "p", 5)
    assert store.graph.entry_ids_of_memories([memory_id]) == [entry]
    assert store.graph.memory_confidence([memory_id]) == {memory_id: 0.7}
    assert store.graph.memories_with_output([memory_id, 999]) == {memory_id}


def test_graph_browse_reads(store):
    memory_id = add(store, "Alice lives in Lyon with her husband Bob", persona_id="p")
    with store.write() as tx:
        tx.graph.replace_for_memory(memory_id, "p", graph_of(), "h", NOW)
    alice, bob = (store.graph.nodes_named([n], "p", 5)[0] for n in ("alice", "bob"))
    assert store.graph_browse.graph_personas(5) == ["p"]
    assert {t: n for t, n in store.graph_browse.persona_node_counts("p").items() if n} == {
        "person": 2, "place": 1, "fact": 1}
    top = store.graph_browse.most_connected("p", 1)[0]
    assert (top["id"], top["degree"]) == (alice, 3)
    assert [tuple(e) for e in store.graph_browse.edges_among([alice, bob])] == [(alice, bob, "relation", "husband", 1)]
    node = store.graph_browse.node_row(alice)
    assert (node["persona_id"], node["type"], json.loads(node["forms"])) == ("p", "person", ["Alice"])
    assert store.graph_browse.node_row(999) is None
    relation = store.graph_browse.node_relations(bob, 5)[0]
    assert (relation["outgoing"], relation["relation"], relation["id"]) == (0, "husband", alice)
    assert {link["value"] for link in store.graph_browse.node_links(alice, 10)} \
        == {"Lyon", "Bob", "Alice lives in Lyon"}
    fact = store.graph.entry_nodes(store.graph.entry_ids_of_memories([memory_id]))[0]
    assert [e["source_memory_id"] for e in store.graph_browse.node_entries(fact, 5)] == [memory_id]
    assert store.graph_browse.node_memories(alice, 5) == ([memory_id], 1)
    assert [e["node_value"] for e in store.graph_browse.entries_of_memory(memory_id)] == ["Alice lives in Lyon"]
    assert len(store.graph_browse.edges_of_memory(memory_id)) == 3


def test_graph_deletes_drop_entries_edges_and_orphan_nodes(store):
    first, second = add(store, "first", persona_id="p"), add(store, "second", persona_id="p")
    with store.write() as tx:
        [entry] = tx.graph.replace_for_memory(first, "p", graph_of(atom_id=7), "h", NOW)
        tx.graph.replace_for_memory(second, "p", MemoryGraph([], [EdgeSpec(ALICE, LYON, "co_occurs_with", 0.5)], []),
                                    "h", NOW)
    assert store.graph.entries_of_atoms([7]) == [entry]
    with store.write() as tx:
        removed = tx.graph.delete_entries([entry])
    assert removed == {"graph_entries": 1, "graph_edges": 1, "graph_nodes": 1}  # the fact node
    with store.write() as tx:
        receipt = tx.graph.delete_for_memory(first)
    assert (receipt["graph_edges"], receipt["graph_nodes"]) == (2, 1)  # Bob; Alice and Lyon stay
    assert store.graph.table_counts() == {"graph_nodes": 2, "graph_edges": 1, "graph_entries": 0,
                                          "graph_entries_fts": 0}


# -- atoms -------------------------------------------------------------------------------


def owner(store, memory_id: int, persona: str | None = "p") -> AtomOwner:
    return AtomOwner(memory_id, persona, None, 0.5, store.documents.get(memory_id).content_hash)


def test_atoms_insert_search_and_read(store):
    memory_id = add(store, "Alice likes green tea", persona_id="p")
    with store.write() as tx:
        atom = tx.atoms.insert(owner(store, memory_id), AtomRow("preference", "Alice likes green tea",
                                                                "alice likes green tea", 0.8), NOW)
    [row] = store.atoms.of_memory(memory_id)
    assert (row["id"], row["type"], row["state"], row["confidence"]) == (atom, "preference", "active", 0.8)
    [hit] = store.atoms.search(["tea"], "p", None, ["preference"], 5)
    assert hit["id"] == atom and hit["raw"] > 0
    assert store.atoms.search(["tea"], "q", None, None, 5) == []
    assert [r["id"] for r in store.atoms.similar_active(["green", "tea"], "p", other_than_memory=999)] == [atom]
    assert store.atoms.similar_active(["tea"], "p", other_than_memory=memory_id) == []
    assert [r["id"] for r in store.atoms.still_valid_of_types(["preference"], "p", None, NOW, 5)] == [atom]
    assert [(r["memory_id"], r["type"]) for r in store.atoms.validity_rows([memory_id])] == [(memory_id, "preference")]


def test_plans_due_between_lists_memories_by_their_plans_deadline(store):
    dentist, trip, other = (add(store, text, persona_id=persona) for text, persona in
                            (("dentist", "p"), ("trip", "p"), ("dentist", "q")))
    with store.write() as tx:
        for memory_id, due in ((dentist, NOW + 2 * DAY), (dentist, NOW + 9 * DAY), (trip, NOW + DAY),
                               (other, NOW + 2 * DAY)):
            tx.atoms.insert(owner(store, memory_id, "q" if memory_id == other else "p"),
                            AtomRow("planned", "plan", "plan", 0.9, deadline=due), NOW)
        tx.atoms.insert(owner(store, trip), AtomRow("factual", "fact", "fact", 0.9, ttl_days=30), NOW)
    due = lambda start, end, persona="p": [(r["memory_id"], r["deadline"]) for r in  # noqa: E731
                                           store.atoms.plans_due_between(start, end, persona, None, 10)]
    assert due(NOW, NOW + 3 * DAY) == [(trip, NOW + DAY), (dentist, NOW + 2 * DAY)]
    assert due(NOW + 3 * DAY, None) == [(dentist, NOW + 9 * DAY)]
    assert due(None, NOW + 2 * DAY) == [(trip, NOW + DAY)]  # the end is not in it
    assert due(None, None, "q") == [(other, NOW + 2 * DAY)]
    store.atoms.expire(NOW + 5 * DAY)  # a plan past its deadline still says when it happened
    assert due(None, NOW + 3 * DAY) == [(trip, NOW + DAY), (dentist, NOW + 2 * DAY)]


def test_atoms_expire_then_are_forgotten_then_purged(store):
    memory_id = add(store, "dentist on Friday", persona_id="p")
    with store.write() as tx:
        plan = tx.atoms.insert(owner(store, memory_id), AtomRow("planned", "dentist", "dentist", 0.9,
                                                                deadline=NOW + DAY), NOW)
        fact = tx.atoms.insert(owner(store, memory_id), AtomRow("factual", "sky", "sky", 0.9, ttl_days=30), NOW)
    assert store.atoms.still_valid_of_types(["planned"], "p", None, NOW + 2 * DAY, 5) == []
    assert store.atoms.expire(NOW + 2 * DAY) == [plan]
    assert store.atoms.search(["dentist"], "p", None, None, 5) == []
    assert store.atoms.forget(NOW + 3 * DAY, NOW + 3 * DAY) == [plan]
    assert store.atoms.purge(NOW + 4 * DAY, NOW + 4 * DAY) == [plan]
    assert {r["id"]: r["state"] for r in store.atoms.of_memory(memory_id)} == {plan: "purged", fact: "active"}
    assert store.atoms.expire(NOW + 31 * DAY) == [fact]


def test_atoms_supersede_reinforce_and_reactivate(store):
    old_memory = add(store, "Alice lives in Paris", persona_id="p")
    new_memory = add(store, "Alice lives in Lyon", persona_id="p")
    row = lambda value: AtomRow("factual", f"Alice lives in {value}", value.lower(), 0.7,  # noqa: E731
                                subject="alice", attribute="lives in", value=value)
    with store.write() as tx:
        old = tx.atoms.insert(owner(store, old_memory), row("Paris"), NOW)
        new = tx.atoms.insert(owner(store, new_memory), row("Lyon"), NOW)
        assert tx.atoms.supersede("p", "alice", "lives in", "Lyon", new, NOW) == 1
        tx.atoms.insert(owner(store, new_memory), row("Paris"), NOW, state="dormant", superseded_by=old)
        tx.atoms.set_reinforcement(old, 2, 0.9, 60.0, NOW, restart=True)
    assert [(r["id"], r["state"]) for r in store.atoms.supersede_chain(new, "p")] \
        == [(old, "superseded"), (new, "active")]
    # Recall reads which memory replaced a superseded atom's (a dormant reinforcement row is no
    # replacement).
    validity = store.atoms.validity_rows([old_memory, new_memory])
    assert {(r["memory_id"], r["state"], r["replaced_by"]) for r in validity} \
        == {(old_memory, "superseded", new_memory), (new_memory, "active", None), (new_memory, "dormant", None)}
    assert [(r["id"], r["reinforcement_count"]) for r in store.atoms.reinforced_by(new_memory)] == [(old, 2)]
    assert store.atoms.reactivate_superseded_by(new_memory, NOW) == 1
    assert store.atoms.of_memory(old_memory)[0]["state"] == "active"
    assert store.atoms.delete_for_memory(new_memory) == {"memory_atoms": 2, "atoms_fts": 1}


def test_atoms_page_and_counts(store):
    memory_id = add(store, "notes", persona_id="p")
    with store.write() as tx:
        ids = [tx.atoms.insert(owner(store, memory_id), AtomRow(t, t, t, 0.5), NOW, state=s)
               for t, s in [("factual", "active"), ("factual", "expired"), ("episodic", "active"),
                            ("factual", "dormant")]]
    assert [r["id"] for r in store.atoms.page(None, None, "p", 10, 0)] == [ids[2], ids[1], ids[0]]
    assert [r["id"] for r in store.atoms.page("factual", "active", None, 10, 0)] == [ids[0]]
    assert [r["id"] for r in store.atoms.page(None, None, None, 1, 1)] == [ids[1]]
    assert sorted(tuple(r) for r in store.atoms.counts_by_type_and_state()) == [
        ("episodic", "active", 1), ("factual", "active", 1), ("factual", "dormant", 1), ("factual", "expired", 1)]


# -- vectors -----------------------------------------------------------------------------


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def put(store, owner_id: int, vector: np.ndarray, kind: str = "document", memory_id: int | None = None,
        model: str = "m") -> int:
    """Upsert one vector; the change number it took."""
    with store.write() as tx:
        tx.vectors.upsert(VectorRow(kind, owner_id, memory_id or owner_id, model, vector, "h"), NOW)
        return tx.vectors.current_seq()


def space(store, after_seq: int | None = None) -> dict[int, list[float]]:
    batches = store.vectors.iter_space("document", "m", 3, batch=1) if after_seq is None else \
        store.vectors.iter_changes("document", "m", 3, after_seq, batch=1)
    return {int(i): [round(float(x), 3) for x in row] for ids, matrix in batches for i, row in zip(ids, matrix)}


def test_vectors_put_replace_delete_and_read_a_space(store):
    a, b = add(store, "a"), add(store, "b")
    put(store, a, unit(1, 0, 0))
    put(store, b, unit(0, 1, 0))
    put(store, a, unit(0, 0, 1))  # replaces a's vector
    assert space(store) == {a: [0, 0, 1], b: [0, 1, 0]}
    assert (store.vectors.space_count("document", "m", 3), store.vectors.stored_dim("document", "m")) == (2, 3)
    assert store.vectors.owners_with_vectors("document", "m", [a, b, 999]) == {a, b}
    assert store.vectors.documents_with_vector("m", 3) == 2
    assert store.vectors.delete_owners("document", [b, 999], NOW) == 1
    with store.write() as tx:
        assert tx.vectors.delete_for_memory(a, NOW, kind="document") == {"vectors": 1}
    assert space(store) == {} and store.vectors.stored_dim("document", "m") == 0


def test_passage_vectors_of_a_memory_are_scoped_by_their_memory_and_replaced_with_it(store):
    alice, bob = add(store, "alice's long note", persona_id="alice"), add(store, "bob's long note", persona_id="bob")
    owners = {m: [passage_owner(m, n) for n in (1, 2, 3)] for m in (alice, bob)}
    for memory_id, of_memory in owners.items():
        for owner in of_memory:
            put(store, owner, unit(1, 0, 0), kind="passage", memory_id=memory_id)
    assert [passage_of(o) for o in owners[alice]] == [(alice, 1), (alice, 2), (alice, 3)]
    assert sorted(store.vectors.owners_in_scope("passage", DocumentFilter(persona_id="alice"))) == owners[alice]
    assert sorted(store.vectors.owners_in_scope("passage", DocumentFilter())) == sorted(owners[alice] + owners[bob])
    assert store.vectors.owners_in_scope("document", DocumentFilter(persona_id="alice")) == []
    with store.write() as tx:
        assert tx.vectors.delete_for_memory(alice, NOW, kind="passage") == {"vectors": 3}
    assert store.vectors.owners_in_scope("passage", DocumentFilter(persona_id="alice")) == []
    assert sorted(store.vectors.owners_changed_since("passage", 0)) == sorted(owners[alice] + owners[bob])
    with pytest.raises(ValueError):
        passage_owner(alice, PASSAGE_SLOTS)


def test_the_vector_change_sequence_shows_additions_replacements_and_deletions_in_order(store):
    a, b = add(store, "a"), add(store, "b")
    start = store.vectors.current_seq()
    added_a = put(store, a, unit(1, 0, 0))
    added_b = put(store, b, unit(0, 1, 0))
    replaced_a = put(store, a, unit(0, 0, 1))
    with store.write() as tx:
        tx.vectors.delete_owners("document", [b], NOW)
        deleted_b = tx.vectors.current_seq()
    assert start < added_a < added_b < replaced_a < deleted_b
    assert sorted(store.vectors.owners_changed_since("document", start)) == [a, b]
    assert space(store, start) == {a: [0, 0, 1]}  # b's vector is gone, a's is the new one
    assert space(store, added_b) == {a: [0, 0, 1]}
    assert store.vectors.owners_changed_since("document", replaced_a) == [b]  # the deletion
    assert [store.vectors.changes_since("document", s) for s in (start, replaced_a, deleted_b)] == [2, 1, 0]
    assert store.vectors.owners_changed_since("graph_entry", start) == []


def test_pruned_tombstones_raise_the_floor(store):
    a = add(store, "a")
    put(store, a, unit(1, 0, 0))
    store.vectors.delete_owners("document", [a], NOW)
    deleted = store.vectors.current_seq()
    assert store.vectors.tombstone_floor() < deleted
    assert store.vectors.prune_tombstones(older_than=NOW + 1) == 1
    assert store.vectors.tombstone_floor() == deleted
    assert store.vectors.changes_since("document", 0) == 0


def test_vectors_of_another_model_are_reported_and_dropped(store):
    a = add(store, "a")
    put(store, a, unit(1, 0, 0), model="old")
    put(store, a, unit(1, 0), kind="graph_entry", model="m", memory_id=a)
    assert sorted(tuple(r) for r in store.vectors.space_figures()) \
        == [("document", "old", 3, 1), ("graph_entry", "m", 2, 1)]
    assert "old" in store.vectors.foreign_space_warning("m", 2)
    assert store.vectors.delete_foreign("m", 2, NOW) == 1
    assert store.vectors.foreign_space_warning("m", 2) is None


def test_full_text_scrubbing_runs_in_a_write(store):
    assert isinstance(store.fts.scrubs_in_place(), bool)
    with store.write() as tx:
        tx.fts.scrub_terms(["documents_fts", "atoms_fts", "graph_entries_fts"])
    with pytest.raises(ValueError):
        with store.write() as tx:
            tx.fts.scrub_terms(["documents"])


def test_a_backup_is_a_new_file_in_the_directory(store, tmp_path):
    add(store, "kept in the backup")
    path = store.backup(tmp_path / "backups", NOW, "manual")
    assert path.parent == tmp_path / "backups" and path.is_file()
