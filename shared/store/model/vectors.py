"""Vectors as the layers above the store see them: their kinds, a row to store, and which stored
spaces belong to another model."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

KINDS = ("document", "graph_entry")


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
