"""A schema migration, as both engines list theirs: a version, a name and its statements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: Sequence[str]
