"""The stage journal's names: the stages, their statuses and dependencies, and a unit of work."""

from __future__ import annotations

from dataclasses import dataclass

# Stage names, in the order a memory's stages run; the schema's CHECK lists the same.
STAGES = ("embed", "atoms", "graph")
# The stage that writes a memory's own vectors: once it is done the memory is found by meaning.
EMBED = STAGES[0]

# A stage row's status (the memory_stages CHECK constraint in sqlite/schema.py and
# postgres/schema.py lists the same four).
PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"

STATUSES = (PENDING, RUNNING, FAILED, DONE)

# The stages a stage reads the output of: it runs only once they are done for the same version
# of the memory, runs again whenever one of them has run again, and fails when one fails for
# good (so it never waits forever). The graph reads the memory's facts and, for its entries,
# the memory's own vectors.
DEPENDS_ON: dict[str, tuple[str, ...]] = {"graph": ("atoms", "embed")}


def dependents(stage: str) -> list[str]:
    return [later for later, earlier in DEPENDS_ON.items() if stage in earlier]


@dataclass(frozen=True)
class StageKey:
    """One unit of work: a stage of a memory, for one version of its content."""

    memory_id: int
    stage: str
    content_hash: str
