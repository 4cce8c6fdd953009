"""An atom's life once stored: reinforcement, superseding, retraction, and how valid it is over time.

- A new atom whose bag-of-words Jaccard with an active atom of the same persona reaches the
  threshold reinforces that atom (count + 1, confidence max, shelf life recomputed and
  restarted) instead of duplicating it; the memory keeps a dormant provenance row for it.
- Atoms with (subject, attribute, value) form a slot's timeline in the order their memories
  were said (original time, else when stored; ties by id), not the order the worker stored
  them in (an old history imported last): each is superseded by the first one said after it
  that gives another value, and the value said last stands.
- Storing a memory's atoms again first retracts what its previous atoms did (reinforcements
  taken back, atoms it superseded handed to the next one in their timeline or active again),
  so running the atoms stage twice, or deleting the memory, leaves other memories' atoms as
  if it had never been stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.decay import atom_time_factor
from shared.errors import StorageError
from shared.store.interface import Session
from shared.store.model.atoms import AtomOwner, AtomRow
from shared.store.model.record import Record
from shared.text.overlap import jaccard
from shared.units import DAY

TtlFor = Callable[[str, float, int], float]  # (type, importance, reinforcements) -> days


@dataclass
class AtomsOutcome:
    inserted: int = 0
    reinforced: int = 0
    superseded: int = 0
    needs_repair: int = 0


def retract(tx: Session, memory_id: int, ttl_for: TtlFor, now: float) -> None:
    """Undo what a memory's stored atoms did to other memories' atoms, then remove them."""
    for target in tx.atoms.reinforced_by(memory_id):
        count = max(target["reinforcement_count"] - 1, 0)
        tx.atoms.set_reinforcement(target["id"], count, target["confidence"],
                                   ttl_for(target["type"], target["importance"], count), now, restart=False)
    tx.atoms.reactivate_superseded_by(memory_id, now)


def store_atoms(tx: Session, owner: AtomOwner, rows: Sequence[AtomRow], ttl_for: TtlFor,
                reinforce_jaccard: float, now: float) -> AtomsOutcome:
    """A memory's atoms, replaced (inside the stage's transaction)."""
    retract(tx, owner.memory_id, ttl_for, now)
    tx.atoms.delete_for_memory(owner.memory_id)
    outcome = AtomsOutcome()
    fresh = []
    for row in rows:
        target = _reinforce(tx, owner, row, ttl_for, reinforce_jaccard, now)
        if target is None:
            fresh.append(row)
            continue
        outcome.reinforced += 1
        # Provenance: this memory said it too. Dormant, so never searched or counted twice.
        tx.atoms.insert(owner, row, now, state="dormant", superseded_by=target)
    for row, atom_id in _insert_batch(tx, owner, fresh, now, outcome):
        if row.subject and row.attribute and row.value:
            outcome.superseded += tx.atoms.supersede(owner.persona_id, row.subject, row.attribute,
                                                     row.value, atom_id, now)
    return outcome


def _reinforce(tx: Session, owner: AtomOwner, row: AtomRow, ttl_for: TtlFor, threshold: float,
               now: float) -> int | None:
    """Reinforce the most similar active atom if similar enough; return its id."""
    terms = set(row.tokens.split())
    candidates = tx.atoms.similar_active(sorted(terms), owner.persona_id, owner.memory_id)
    best = max(candidates, key=lambda c: jaccard(terms, c["tokens"].split()), default=None)
    if best is None or jaccard(terms, best["tokens"].split()) < threshold:
        return None
    count = best["reinforcement_count"] + 1
    tx.atoms.set_reinforcement(best["id"], count, max(best["confidence"], row.confidence),
                               ttl_for(best["type"], owner.importance, count), now, restart=True)
    return best["id"]


def _insert_batch(tx: Session, owner: AtomOwner, rows: Sequence[AtomRow], now: float,
                  outcome: AtomsOutcome) -> list[tuple[AtomRow, int]]:
    """Rows in as a batch; if the batch fails, row by row; a row that still fails is kept
    flagged needs_repair instead of losing the fact."""
    try:
        with tx.savepoint("atoms_batch"):
            stored = [(row, tx.atoms.insert(owner, row, now)) for row in rows]
        outcome.inserted += len(stored)
        return stored
    except StorageError:
        pass
    stored = []
    for row in rows:
        try:
            with tx.savepoint("atoms_row"):
                stored.append((row, tx.atoms.insert(owner, row, now)))
            outcome.inserted += 1
        except StorageError:
            tx.atoms.insert(owner, AtomRow("unknown", str(row.text)[:2000], str(row.tokens), 0.0),
                            now, needs_repair=True)
            outcome.needs_repair += 1
    return stored


def time_factor(row: Mapping[str, Any] | Record, now: float) -> float:
    """How valid an atom row still is: its type's curve over the age since it was last
    (re)confirmed, or its deadline for a plan."""
    to_deadline = None if row["deadline"] is None else (row["deadline"] - now) / DAY
    age = (now - (row["state_time"] or row["create_time"])) / DAY
    return atom_time_factor(row["type"], age, row["ttl_days"], to_deadline)


def temporal_factors(rows: Sequence, now: float) -> dict[int, float]:
    """Per memory that has atoms (rows: store.atoms.validity_rows of the memories): the time
    factor of its most valid atom (an atom that is no longer active counts 0). Memories without
    atoms are left out (factor 1)."""
    factors: dict[int, float] = {}
    for row in rows:
        factor = time_factor(row, now) if row["state"] == "active" else 0.0
        factors[row["memory_id"]] = max(factor, factors.get(row["memory_id"], 0.0))
    return factors


def replaced_memories(rows: Sequence) -> dict[int, int]:
    """Of the memories (rows: store.atoms.validity_rows), those a later statement replaced —
    some atom superseded and none still active (a plan past its deadline is not replaced) —
    each with the memory that replaced it."""
    active = {row["memory_id"] for row in rows if row["state"] == "active"}
    replaced: dict[int, int] = {}
    for row in rows:
        if row["replaced_by"] is not None and row["memory_id"] not in active:
            replaced.setdefault(row["memory_id"], row["replaced_by"])
    return replaced
