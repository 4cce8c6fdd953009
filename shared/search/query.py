"""A recall query as every channel sees it: its text, its terms, and its vector on demand."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar, cast

import numpy as np

from shared.store.model.fulltext import MAX_QUERY_TERMS
from shared.text.segment import Segmenter

T = TypeVar("T")

# The embedder sees at most this much of a query (longer queries cost time, not quality).
MAX_EMBED_CHARS = 2000


class Query:
    """Segmented once; embedded at most once, and only if a vector channel asks."""

    def __init__(self, text: str, segmenter: Segmenter, embed: Callable[[str], np.ndarray] | None):
        self.text = text
        self.terms = segmenter.unique_terms(text, MAX_QUERY_TERMS)
        self._embed = embed
        self._vector: np.ndarray | None = None
        self._error: Exception | None = None
        self._lock = threading.Lock()
        self._derived: dict[str, object] = {}
        self._derived_lock = threading.Lock()  # not the embedding's: that one is held ~24 ms

    def vector(self) -> np.ndarray:
        """The query embedding (raises the embedder's error; every caller sees the same one)."""
        with self._lock:
            if self._error is not None:
                raise self._error
            if self._vector is None:
                if self._embed is None:
                    raise RuntimeError("this recall has no embedder")  # a wiring error
                try:
                    self._vector = self._embed(self.text[:MAX_EMBED_CHARS])
                except Exception as exc:  # an embedder that is down is asked once per recall
                    self._error = exc
                    raise
            return self._vector

    def derived(self, name: str, compute: Callable[[], T]) -> T:
        """A value worked out from the query once per recall, by whichever part asks first
        (the entities a question's relations lead to: the graph channel and recall both use them)."""
        with self._derived_lock:
            if name not in self._derived:
                self._derived[name] = compute()
            return cast(T, self._derived[name])  # a name always stands for one kind of value
