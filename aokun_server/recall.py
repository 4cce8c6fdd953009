"""Recall in the front: run the retrieval channels and shape the hits."""

from __future__ import annotations

from dataclasses import dataclass

from shared.search.bm25 import Bm25Channel
from shared.store.documents import Document, DocumentFilter, DocumentStore


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

    def __init__(self, store: DocumentStore, bm25: Bm25Channel):
        self.store = store
        self.bm25 = bm25

    def recall(self, request: RecallRequest) -> list[Hit]:
        ranked = self.bm25.search(request.query, request.scope, request.k)
        documents = self.store.get_many([doc_id for doc_id, _ in ranked])
        return [Hit(documents[doc_id], score) for doc_id, score in ranked if doc_id in documents]
