"""The tables a store is made of, as copying one to another engine reads them: each copied
table's key, the tables whose rows replace the target's, late self-references, and the
full-text indexes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# The tables copied, in an order where every table comes after those it refers to. meta is
# first: it carries the source's store id, which marks a target as a copy of that source.
# users exists from SQLite migration 11 (PostgreSQL migration 1) on.
TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "meta": ("key",),
    "documents": ("id",),
    "memory_stages": ("memory_id", "stage"),
    "memory_atoms": ("id",),
    "graph_nodes": ("id",),
    "graph_edges": ("id",),
    "graph_entries": ("id",),
    "vectors": ("kind", "owner_id"),
    "vector_tombstones": ("seq",),
    "memory_context": ("memory_id", "neighbour_id"),
    "llm_usage": ("model",),
    "periodic_runs": ("name",),
    "users": ("name",),
}


# Tables a store writes rows in before it holds any memory (SQLite's migrations put the
# vector sequence and its floor in meta; a worker started on an empty store records its
# periodic runs): there a copied row replaces the target's, so the target goes on with the
# source's numbers (vector sequence, decay day, store id, last runs) rather than its own.
REPLACED = frozenset({"meta", "periodic_runs"})


# A column referring to a row of its own table that may come later in key order (an atom is
# superseded by a newer one, or a dormant one by an older one): it is written NULL with its
# row, and set once the row it names is there (see put).
LATE_REFERENCES: dict[str, tuple[str, str]] = {"memory_atoms": ("superseded_by", "id")}


@dataclass(frozen=True)
class FullTextIndex:
    """A full-text index: the table whose rows it indexes (a row's id is its row id there)
    and its columns, in order."""

    table: str
    columns: tuple[str, ...]
    sqlite_table: str


FULLTEXT: dict[str, FullTextIndex] = {
    "documents": FullTextIndex("documents", ("tokens", "context", "scope"), "documents_fts"),
    "atoms": FullTextIndex("memory_atoms", ("tokens",), "atoms_fts"),
    "graph_entries": FullTextIndex("graph_entries", ("tokens",), "graph_entries_fts"),
}


def key_of(table: str, row: Any) -> tuple[Any, ...]:
    """A row's primary key (what `page` continues after)."""
    return tuple(row[column] for column in known_table(table))


def known_table(table: str) -> tuple[str, ...]:
    """The table's key columns; ValueError for a table that is not copied (a programming
    error: table names reach SQL only from TABLE_KEYS)."""
    try:
        return TABLE_KEYS[table]
    except KeyError:
        raise ValueError(f"{table!r} is not a copied table ({', '.join(TABLE_KEYS)})") from None


def fulltext_index(index: str) -> FullTextIndex:
    try:
        return FULLTEXT[index]
    except KeyError:
        raise ValueError(f"{index!r} is not a full-text index ({', '.join(FULLTEXT)})") from None


def fulltext_values(columns: Sequence[str | None], spec: FullTextIndex) -> list[str]:
    """The row's column texts, as many as the index has (a missing or NULL one is empty)."""
    given = [("" if value is None else value) for value in columns][:len(spec.columns)]
    return given + [""] * (len(spec.columns) - len(given))

