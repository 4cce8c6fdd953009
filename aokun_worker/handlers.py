"""Stage bodies: what each stage computes for a batch of documents and how it stores it.

compute() runs outside any transaction (it may be slow); store() runs inside the transaction
that marks the stage done, so a result is never written without its stage being done, nor
the other way round.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any, Protocol

import numpy as np

from shared.atom_life import store_atoms
from shared.config import AtomsConfig
from shared.embedders import Embedder
from shared.errors import AokunError
from shared.extract.atomize import AtomRules, draft_atoms, speaker_of, ttl_days
from shared.extract.graph_rules import GraphBuilder, StoredFact
from shared.store.interface import Session, Store
from shared.store.model.atoms import AtomOwner, AtomRow
from shared.store.model.documents import Document
from shared.store.model.graph import MemoryGraph
from shared.store.model.vectors import VectorRow, passage_owner
from shared.text.passages import passage_holding, passages
from shared.text.segment import Segmenter

# Atom states whose fact still belongs in the graph.
_GRAPHED_STATES = ("active", "dormant", "superseded", "expired")


class StageHandler(Protocol):
    stage: str
    batch_size: int

    def compute(self, documents: Sequence[Document]) -> Collection[Any]:
        """One result per document, in order; raise to fail the whole batch."""
        ...

    def store(self, tx: Session, document: Document, result: Any, now: float) -> None:
        """Write one document's result (inside the stage's completing transaction)."""
        ...


# How many of a memory's context neighbours (nearest first) go into its embedding, and how much
# of each (its end, in whole sentences within this many estimated tokens). BM25 takes them all
# (memory.context_turns); one embedding holds less: one turn beat none and two, and its last 64
# tokens beat 16, 32 and the whole turn, on every held-out fold (docs/performance.md).
EMBED_CONTEXT_TURNS = 1
EMBED_CONTEXT_TOKENS = 64


def embedding_text(document: Document, context: Sequence[str] = ()) -> str:
    """What a short memory is embedded as: its nearest context neighbours (oldest first;
    shared/store/portable/neighbours.py), then its stored text, time marker and speaker included
    (who said it is much of what a question asks about: docs/performance.md)."""
    return "\n".join([*context, document.text])


@dataclass(frozen=True)
class Embedded:
    """A memory's vectors: the memory's own (of its first passage, with its context) and, for a
    long memory, one per further passage."""

    document: np.ndarray
    passages: np.ndarray


def embedding_texts(document: Document, context: Sequence[str] = (),
                    context_tokens: int = EMBED_CONTEXT_TOKENS) -> list[str]:
    """What a memory is embedded as: one text when it fits a passage; else its first passage
    with the context (the memory's own vector) and every further passage alone. A context
    neighbour gives only its end: the memory's own words are most of what the model reads."""
    parts = passages(document.text)
    context = [passages(c, context_tokens)[-1].text for c in context]
    if len(parts) == 1:
        return [embedding_text(document, context)]
    return ["\n".join([*context, parts[0].text]), *(p.text for p in parts[1:])]


class EmbedHandler:
    """Embeds documents into the configured vector space, a long one as passages; the
    passages of a whole batch of memories go to the embedder in one call."""

    stage = "embed"

    def __init__(self, embedder: Embedder, batch_size: int, store: Store | None = None):
        self.embedder = embedder
        self.batch_size = batch_size
        self._store = store  # where the context is read; without it memories are embedded alone

    def compute(self, documents: Sequence[Document]) -> list[Embedded]:
        contexts = (self._store.neighbours.texts_of([d.id for d in documents])
                    if self._store is not None else {})
        texts = [embedding_texts(d, contexts.get(d.id, [])[:EMBED_CONTEXT_TURNS][::-1]) for d in documents]
        matrix = self.embedder.embed_passages([t for of_one in texts for t in of_one])
        results, start = [], 0
        for of_one in texts:
            results.append(Embedded(matrix[start], matrix[start + 1:start + len(of_one)]))
            start += len(of_one)
        return results

    def store(self, tx: Session, document: Document, result: Embedded, now: float) -> None:
        model, content_hash = self.embedder.model, document.content_hash
        tx.vectors.upsert(VectorRow("document", document.id, document.id, model, result.document, content_hash), now)
        # An edited memory may have fewer passages than before: none of the old ones stays.
        tx.vectors.delete_for_memory(document.id, now, kind="passage")
        for number, vector in enumerate(result.passages, start=1):
            tx.vectors.upsert(VectorRow("passage", passage_owner(document.id, number), document.id, model,
                                        vector, content_hash), now)


class AtomsHandler:
    """Classifies a memory's facts into typed atoms; reinforces, supersedes, stores them."""

    stage = "atoms"
    batch_size = 32

    def __init__(self, rules: AtomRules, segmenter: Segmenter, config: AtomsConfig,
                 zone: tzinfo | None = None):
        self.rules, self.segmenter, self.config = rules, segmenter, config
        self.zone = zone  # the user's clock plans are read on (memory.time_zone; None: the machine's)

    def compute(self, documents: Sequence[Document]):
        return [[AtomRow(d.type, d.text, " ".join(self.segmenter.terms(d.text)), d.confidence,
                         d.subject, d.attribute, d.value, d.deadline, d.ttl_days)
                 for d in draft_atoms(doc, self.rules, self.config, self.zone)] for doc in documents]

    def store(self, tx: Session, document: Document, result, now: float) -> None:
        f = document.fields
        owner = AtomOwner(document.id, f.persona_id, f.session_id, f.importance, document.content_hash)
        store_atoms(tx, owner, result, self.ttl_for, self.config.reinforce_jaccard, now)

    def ttl_for(self, atom_type: str, importance: float, reinforcements: int) -> float:
        return ttl_days(atom_type, importance, reinforcements, self.config)


class StageNotReady(AokunError):
    """A stage ran before a stage whose output it reads finished for this version of the memory."""


class GraphHandler:
    """Builds a memory's graph output from its stored atoms. An entry's vector is the vector of
    the passage that holds its fact (a short memory's own vector): the fact in the context of
    the memory around it, at no embedding cost of its own."""

    stage = "graph"
    batch_size = 16

    def __init__(self, store: Store, builder: GraphBuilder, model: str):
        self._store, self.builder, self.model = store, builder, model  # store() is the method

    def compute(self, documents: Sequence[Document]):
        return [self._built(doc) for doc in documents]

    def _built(self, document: Document) -> tuple[MemoryGraph, list[np.ndarray]]:
        """The memory's graph and, per entry (one per fact, in order), its vector."""
        facts = self._facts(document)
        vectors = self._vectors(document)
        parts = passages(document.text)
        return (self.builder.build(document, speaker_of(document), facts),
                [vectors.get(passage_holding(parts, document.text, f.text), vectors[0]) for f in facts])

    def _facts(self, document: Document) -> list[StoredFact]:
        """The memory's stored atoms, read by id (never re-derived from the text)."""
        if not self._store.stages.is_done(document.id, "atoms", document.content_hash):
            raise StageNotReady(f"memory {document.id}: the atoms stage has not finished for this "
                                "version yet; the graph stage waits for it")
        return [StoredFact(row["id"], row["text"], row["confidence"], row["subject"])
                for row in self._store.atoms.of_memory(document.id) if row["state"] in _GRAPHED_STATES]

    def _vectors(self, document: Document) -> dict[int, np.ndarray]:
        vectors = self._store.vectors.of_memory(document.id, self.model, document.content_hash)
        if 0 not in vectors:
            raise StageNotReady(f"memory {document.id}: its own vector in {self.model} is not stored "
                                "for this version yet; the graph stage waits for it")
        return vectors

    def store(self, tx: Session, document: Document, result, now: float) -> None:
        memory_graph, entry_vectors = result
        tx.vectors.delete_for_memory(document.id, now, kind="graph_entry")
        entry_ids = tx.graph.replace_for_memory(document.id, document.fields.persona_id,
                                                memory_graph, document.content_hash, now)
        for entry_id, vector in zip(entry_ids, entry_vectors, strict=True):
            tx.vectors.upsert(VectorRow("graph_entry", entry_id, document.id, self.model,
                                        vector, document.content_hash), now)
