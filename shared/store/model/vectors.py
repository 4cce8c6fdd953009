"""Vectors as the layers above the store see them: their kinds, a row to store, and which stored
spaces belong to another model."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

KINDS = ("document", "graph_entry", "passage")

# A long memory's passages after its first (whose vector is the memory's "document" one) are
# "passage" vectors owned by memory_id * PASSAGE_SLOTS + their number: the owner says whose and
# which passage it is without a table of its own, and FAISS ids stay unique 64-bit integers.
PASSAGE_SLOTS = 1 << 16


def passage_owner(memory_id: int, number: int) -> int:
    """The owner id of a memory's passage `number` (1 .. PASSAGE_SLOTS - 1)."""
    if not 0 < number < PASSAGE_SLOTS:
        raise ValueError(f"passage number {number} is outside 1..{PASSAGE_SLOTS - 1}")
    return memory_id * PASSAGE_SLOTS + number


def passage_of(owner_id: int) -> tuple[int, int]:
    """(memory id, passage number) of a passage vector's owner."""
    return divmod(owner_id, PASSAGE_SLOTS)


@dataclass(frozen=True)
class VectorRow:
    kind: str
    owner_id: int
    memory_id: int
    model: str
    vector: np.ndarray
    content_hash: str


def foreign_spaces_from(spaces: Iterable[tuple[str, str, int, int]], model: str,
                        dim: int) -> list[tuple[str, str, int, int]]:
    return [row for row in spaces if row[1] != model or (dim and row[2] != dim)]
