"""Store conformance (tests/store_conformance.py): what is derived from a memory follows it at
once. An update that moves a memory to another persona or session, or rewrites it, is what an
edit writes; no stage runs after it here (no worker), and still nothing derived from the memory
shows where the memory no longer is, or says what it no longer says: not its atoms (search,
the planned list, the atoms page, supersede chains), not its graph output (entries, nodes,
edges, entry vectors, the browse reads), not its words in its old neighbours' context."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from shared.store.model.atoms import AtomOwner, AtomRow
from shared.store.model.graph import EdgeSpec, EntrySpec, MemoryGraph, NodeSpec
from shared.store.model.vectors import VectorRow
from store_conformance import DAY, NOW, add, opened, store  # noqa: F401 (the fixtures)

SHARED, PRIVATE = "team", "mine"
ALICE, BOB = NodeSpec("person", "Alice", "alice"), NodeSpec("person", "Bob", "bob")
LYON = NodeSpec("place", "Lyon", "lyon")
VAULT = NodeSpec("fact", "The vault code is 4711", "the vault code is 4711")
BOB_FACT = NodeSpec("fact", "Bob lives in Lyon", "bob lives in lyon")
SECRET = "The vault code is 4711. Alice lives in Lyon and flies there on Friday."
TERMS = ["vault", "4711", "lyon", "alice", "bob", "friday"]


def lives_in(city: str) -> AtomRow:
    return AtomRow("factual", f"Alice lives in {city}", f"alice lives {city.lower()}", 0.8,
                   subject="alice", attribute="lives in", value=city)


def derive(store, memory_id: int, atoms: list[AtomRow], graph: MemoryGraph) -> tuple[list[int], list[int]]:
    """What the atoms and graph stages would store for the memory as it is: (atom ids, entry
    ids), with a vector per entry."""
    doc = store.documents.get(memory_id)
    f = doc.fields
    owner = AtomOwner(memory_id, f.persona_id, f.session_id, 0.5, doc.content_hash)
    with store.write() as tx:
        atom_ids = [tx.atoms.insert(owner, row, NOW) for row in atoms]
        entries = tx.graph.replace_for_memory(memory_id, f.persona_id, graph, doc.content_hash, NOW)
        for entry in entries:
            tx.vectors.upsert(VectorRow("graph_entry", entry, memory_id, "m", np.full(2, 0.5 ** 0.5, np.float32),
                                        doc.content_hash), NOW)
    return atom_ids, entries


def edit(store, memory_id: int, text: str | None = None, **changes) -> None:
    """An update as an edit writes it (the stages are not run)."""
    doc = store.documents.get(memory_id)
    text = doc.text if text is None else text
    with store.write() as tx:
        tx.documents.update(memory_id, text, text.lower(), replace(doc.fields, **changes), NOW + 1)


@pytest.fixture
def memories(store):
    """Two memories of the shared persona with their atoms and graph output: the secret one
    (a plan, a fact, Alice's city, which superseded the other's; Alice, Lyon and the vault
    fact) and the other (Bob in Lyon, Alice in Paris): yields (secret id, other id, {name: id})."""
    other = add(store, "Bob lives in Lyon. Alice lived in Paris.", persona_id=SHARED)
    secret = add(store, SECRET, persona_id=SHARED)
    (bob_atom, paris), _ = derive(store, other, [AtomRow("factual", "Bob lives in Lyon", "bob lives lyon", 0.8),
                                                 lives_in("Paris")],
                                  MemoryGraph([BOB, LYON], [EdgeSpec(BOB, LYON, "co_occurs_with", 0.8),
                                                            EdgeSpec(BOB_FACT, BOB, "describes", 0.8)],
                                              [EntrySpec("Fact: Bob lives in Lyon", "bob lives lyon", BOB_FACT, 0.8)]))
    (_plan, _vault, lyon_atom), entries = derive(
        store, secret, [AtomRow("planned", "Alice flies to Lyon on Friday", "alice flies lyon friday", 0.9,
                                deadline=NOW + DAY),
                        AtomRow("factual", "The vault code is 4711", "vault code 4711", 0.9), lives_in("Lyon")],
        MemoryGraph([ALICE, LYON], [EdgeSpec(ALICE, LYON, "co_occurs_with", 0.9),
                                    EdgeSpec(VAULT, ALICE, "describes", 0.9)],
                    [EntrySpec("Fact: The vault code is 4711", "vault code 4711", VAULT, 0.9)]))
    with store.write() as tx:
        tx.atoms.supersede(SHARED, "alice", "lives in", "Lyon", lyon_atom, NOW)
    yield secret, other, {"paris": paris, "lyon": lyon_atom, "bob": bob_atom, "entry": entries[0]}


def atoms_shown(store, persona: str | None, session: str | None = None) -> set[int]:
    """The memories whose atoms a reader of the persona finds: by search, in the planned (and
    factual) list and on the atoms page."""
    found = store.atoms.search(TERMS, persona, session, None, 20)
    found += store.atoms.still_valid_of_types(["planned", "factual"], persona, session, NOW, 20)
    if session is None:
        found += store.atoms.page(None, None, persona, 20, 0)
    return {row["memory_id"] for row in found}


def graph_shown(store, persona: str) -> tuple[set[int], set[str]]:
    """(memories the graph's recall reads lead to, node names the browse reads show) in a
    persona's graph."""
    nodes = store.graph.nodes_named(["alice", "lyon", "bob", VAULT.canonical], persona, 20)
    nodes += [n for ns in store.graph.entity_nodes_named(["alice", "bob"], persona).values() for n in ns]
    entries = store.graph.search_entries(TERMS, persona, 20)
    nodes += store.graph.entry_nodes([e[0] for e in entries]) + store.graph.neighbours(nodes, 20)
    memories = {e[1] for e in entries} | {m for _, m, _ in store.graph.memories_of_nodes(nodes, 20)}
    browsed = store.graph_browse.most_connected(persona, 20)
    for row in browsed:
        memories.update(store.graph_browse.node_memories(row["id"], 20)[0])
        memories.update(e["source_memory_id"] for e in store.graph_browse.node_entries(row["id"], 20))
    return memories, {row["value"] for row in browsed}


def test_a_memory_moved_to_another_persona_leaves_nothing_behind(store, memories):
    secret, other, ids = memories
    assert atoms_shown(store, SHARED) == {secret, other}
    assert graph_shown(store, SHARED) == ({secret, other}, {"Alice", "Bob", "Lyon", VAULT.value, BOB_FACT.value})
    edit(store, secret, persona_id=PRIVATE)
    # The shared persona keeps only the other memory's atoms and graph.
    assert atoms_shown(store, SHARED) == {other}
    assert graph_shown(store, SHARED) == ({other}, {"Bob", "Lyon", BOB_FACT.value})
    assert store.graph_browse.persona_node_counts(SHARED)["person"] == 1
    [lyon] = store.graph.nodes_named(["lyon"], SHARED, 5)
    assert store.graph_browse.node_memories(lyon, 5) == ([other], 1)
    assert [link["value"] for link in store.graph_browse.node_links(lyon, 5)] == ["Bob"]
    # The atom the secret memory's superseded: its chain no longer reaches the moved memory.
    assert [r["id"] for r in store.atoms.supersede_chain(ids["paris"], SHARED)] == [ids["paris"]]
    # The new persona: nothing stale (the stages derive its atoms and graph again), and the
    # store's unscoped reads show the old rows nowhere either.
    assert atoms_shown(store, PRIVATE) == set() and atoms_shown(store, None) == {other}
    assert graph_shown(store, PRIVATE) == (set(), set())
    assert store.atoms.supersede_chain(ids["lyon"], SHARED) == []
    assert store.atoms.validity_rows([secret]) == []
    assert store.graph.entry_ids_of_memories([secret]) == []
    assert store.graph.entries_memories([ids["entry"]]) == {}
    assert store.vectors.owners_with_vectors("graph_entry", "m", [ids["entry"]]) == set()
    assert store.graph_browse.graph_personas(5) == [SHARED]
    # Another persona's reinforcement finds nothing of it either.
    assert store.atoms.similar_active(["vault", "code", "4711"], SHARED, other_than_memory=other) == []


def test_a_rewritten_memory_shows_none_of_its_old_text(store, memories):
    secret, other, _ = memories
    edit(store, secret, "Alice changed the vault code.")
    assert atoms_shown(store, SHARED) == {other}
    assert graph_shown(store, SHARED) == ({other}, {"Bob", "Lyon", BOB_FACT.value})
    # A change the derived rows do not depend on keeps them.
    edit(store, other, importance=0.9)
    assert atoms_shown(store, SHARED) == {other}
    assert graph_shown(store, SHARED)[0] == {other}


def test_a_memory_moved_to_another_session_leaves_its_atoms_there(store):
    memory_id = add(store, "Alice flies to Lyon on Friday", persona_id=SHARED, session_id="trip")
    derive(store, memory_id, [AtomRow("planned", "Alice flies to Lyon", "alice flies lyon", 0.9,
                                      deadline=NOW + DAY)], MemoryGraph([], [], []))
    assert atoms_shown(store, SHARED, "trip") == {memory_id}
    edit(store, memory_id, session_id="work")
    assert atoms_shown(store, SHARED, "trip") == set() == atoms_shown(store, SHARED, "work")


def test_a_moved_memory_leaves_its_conversation(store):
    first = add(store, "Alice: the vault code is 4711", persona_id=SHARED, session_id="s")
    second = add(store, "Bob: noted", persona_id=SHARED, session_id="s")
    with store.write() as tx:
        tx.neighbours.link(second, [first])
    assert store.neighbours.of(second) == [(first, "Alice: the vault code is 4711")]
    edit(store, first, persona_id=PRIVATE)
    assert store.neighbours.of(second) == []
    assert store.neighbours.texts_of([second]) == {second: []}
    edit(store, first, persona_id=SHARED, session_id="other")
    assert store.neighbours.texts_of([second]) == {second: []}
    edit(store, first, session_id="s")
    assert store.neighbours.texts_of([second]) == {second: ["Alice: the vault code is 4711"]}


def test_a_memory_page_shows_only_the_atoms_of_what_the_memory_now_says(store, memories):
    secret, other, ids = memories
    assert len(store.atoms.of_memory(secret)) == 3
    edit(store, secret, "Alice changed the vault code.")
    assert store.atoms.of_memory(secret) == []
    assert [r["id"] for r in store.atoms.of_memory(other)] == [ids["bob"], ids["paris"]]
