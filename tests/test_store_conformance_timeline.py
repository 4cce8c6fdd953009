"""Store conformance (tests/store_conformance.py): a slot's facts form a timeline in the order
their memories were said, whatever order the atoms stage stores them in (shared/atom_life.py
over the store's supersede): each atom is superseded by the first one said after it giving
another value, and the value said last stands."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import permutations

import pytest

from shared.atom_life import retract, store_atoms
from shared.store.model.atoms import AtomOwner, AtomRow
from store_conformance import NOW, add, opened, store  # noqa: F401 (the fixtures)

SAID = datetime(2026, 1, 1, tzinfo=timezone.utc)
# The city said in each month (Toronto again in the fourth).
CITIES = ["toronto", "vancouver", "montreal", "toronto"]


def ttl(atom_type: str, importance: float, reinforcements: int) -> float:
    return 365.0


def said_in_month(store, month: int, city: str) -> int:
    """A memory said `month` months after SAID naming where the user lives (stored now)."""
    return add(store, f"month {month}: I live in {city}", persona_id="p",
               original_time=SAID + timedelta(days=31 * month))


def derive(store, memory_id: int, city: str) -> None:
    """The atoms stage's write for the memory: one lives_in atom (no reinforcement)."""
    doc = store.documents.get(memory_id)
    owner = AtomOwner(memory_id, "p", None, 0.5, doc.content_hash)
    row = AtomRow("factual", doc.text, f"month{memory_id} {city}", 0.8, "self", "lives_in", city)
    with store.write() as tx:
        store_atoms(tx, owner, [row], ttl, reinforce_jaccard=1.1, now=NOW)


def timeline(store, memories: list[int]) -> list[tuple[str, int | None]]:
    """Each memory's atom: (state, the memory that replaced it)."""
    rows = {r["memory_id"]: r for r in store.atoms.validity_rows(memories)}
    return [(rows[m]["state"], rows[m]["replaced_by"]) for m in memories]


@pytest.mark.parametrize("order", list(permutations(range(4))), ids=lambda o: "".join(map(str, o)))
def test_a_slot_reads_as_said_in_any_order_of_storing(store, order):
    memories = [said_in_month(store, month, city) for month, city in enumerate(CITIES)]
    for month in order:
        derive(store, memories[month], CITIES[month])
    assert timeline(store, memories) == [("superseded", memories[1]), ("superseded", memories[2]),
                                         ("superseded", memories[3]), ("active", None)]


def test_the_later_memory_id_wins_when_two_were_said_at_the_same_time(store):
    first = add(store, "I live in Toronto", persona_id="p", original_time=SAID)
    second = add(store, "I live in Vancouver", persona_id="p", original_time=SAID)
    derive(store, second, "vancouver")
    derive(store, first, "toronto")
    assert timeline(store, [first, second]) == [("superseded", second), ("active", None)]


def test_storing_a_memory_again_keeps_the_timeline(store):
    memories = [said_in_month(store, month, city) for month, city in enumerate(CITIES[:3])]
    for month in (2, 0, 1):
        derive(store, memories[month], CITIES[month])
    for month in (1, 0, 2):  # the atoms stage run again (a migration, an edit back and forth)
        derive(store, memories[month], CITIES[month])
    assert timeline(store, memories) == [("superseded", memories[1]), ("superseded", memories[2]),
                                         ("active", None)]
    with store.write() as tx:  # the newest retracted: the one said before it stands again
        retract(tx, memories[2], ttl, NOW)
        tx.atoms.delete_for_memory(memories[2])
    assert timeline(store, memories[:2]) == [("superseded", memories[1]), ("active", None)]


def test_a_memory_deleted_from_the_middle_leaves_its_neighbours_in_order(store):
    memories = [said_in_month(store, month, city) for month, city in enumerate(CITIES)]
    for month in range(4):
        derive(store, memories[month], CITIES[month])
    for gone in (2, 1):  # Montreal, then Vancouver: Toronto twice, nothing replaced between
        with store.write() as tx:
            retract(tx, memories[gone], ttl, NOW)
            tx.atoms.delete_for_memory(memories[gone])
        if gone == 2:
            assert timeline(store, [memories[0], memories[1], memories[3]]) == [
                ("superseded", memories[1]), ("superseded", memories[3]), ("active", None)]
    assert timeline(store, [memories[0], memories[3]]) == [("active", None), ("active", None)]
