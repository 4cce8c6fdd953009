"""Recall in the front: run the retrieval channels, fuse them, shape the hits."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from shared.errors import AokunError
from shared.search.bm25 import Bm25Channel
from shared.search.fuse import rrf
from shared.search.vectors import VectorChannel
from shared.store.documents import Document, DocumentFilter, DocumentStore

log = logging.getLogger("aokun.recall")


@dataclass(frozen=True)
class RecallRequest:
    query: str
    k: int
    scope: DocumentFilter


@dataclass(frozen=True)
class Hit:
    document: Document
    score: float


class Recaller:
    """Answers a recall request from the channels it was built with."""

    def __init__(self, store: DocumentStore, bm25: Bm25Channel, vector: VectorChannel | None,
                 rrf_k: int):
        self.store = store
        self.bm25 = bm25
        self.vector = vector
        self.rrf_k = rrf_k

    def recall(self, request: RecallRequest) -> list[Hit]:
        depth = max(request.k * 4, 30)
        rankings = [self.bm25.search(request.query, request.scope, depth)]
        if self.vector is not None:
            try:
                rankings.append(self.vector.search(request.query, request.scope, depth))
            except AokunError as exc:
                log.warning("vector channel unavailable, BM25 serves alone: %s", exc)
        # Scaled so that first place in every channel scores 1.0.
        best = len(rankings) / (self.rrf_k + 1)
        fused = [(doc_id, score / best) for doc_id, score in rrf(rankings, self.rrf_k)[:request.k]]
        documents = self.store.get_many([doc_id for doc_id, _ in fused])
        return [Hit(documents[doc_id], score) for doc_id, score in fused if doc_id in documents]
