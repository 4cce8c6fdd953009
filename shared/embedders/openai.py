"""Any OpenAI-compatible /embeddings endpoint (OpenAI, SiliconFlow, Ollama, vLLM) over httpx."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from shared.config import EmbeddingConfig, secret
from shared.embedders import normalise
from shared.errors import EmbeddingError
from shared.http_retry import client as deadline_client
from shared.http_retry import post_json


class OpenAIEmbedder:
    """Batches texts, retries 429/5xx and transport errors with backoff, checks dimensions."""

    def __init__(self, base_url: str, model: str, api_key: str, dimensions: int = 0,
                 batch_size: int = 32, timeout_s: float = 30.0, max_retries: int = 4,
                 backoff_s: float = 0.5):
        self.model = f"openai:{model}"
        self._model_name = model
        self._dimensions = dimensions
        self._dim = dimensions or None
        self._batch_size = batch_size
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout_s = timeout_s
        # Each request must be complete within timeout_s (connect + headers + body), not merely
        # see a byte every timeout_s: see shared.http_retry.
        self._client = deadline_client(base_url.rstrip("/") + "/", headers, timeout_s)

    @classmethod
    def from_config(cls, config: EmbeddingConfig, env: Mapping[str, str] | None = None) -> OpenAIEmbedder:
        key = secret(config.api_key, config.api_key_env, env)
        return cls(config.base_url, config.model, key, config.dimensions, config.batch_size,
                   config.timeout_s, config.max_retries)

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = self.embed_query("dimension probe").shape[0]
        return self._dim

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        parts = [self._embed_batch(list(texts[i:i + self._batch_size]))
                 for i in range(0, len(texts), self._batch_size)]
        return np.vstack(parts) if parts else np.zeros((0, self._dim or 0), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed_batch([text])[0]

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        payload = {"model": self._model_name, "input": texts, "encoding_format": "float"}
        if self._dimensions:
            payload["dimensions"] = self._dimensions
        data = self._post_with_retry(payload)
        try:
            rows = sorted(data["data"], key=lambda item: item["index"])
            matrix = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"embedding API gave an unreadable reply: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise EmbeddingError(f"embedding API returned {matrix.shape[0] if matrix.ndim else 0} "
                                 f"vectors for {len(texts)} texts")
        self._check_dim(matrix.shape[1])
        return normalise(matrix)

    def _check_dim(self, got: int) -> None:
        if self._dim is None:
            self._dim = got
        elif got != self._dim:
            source = "embedding.dimensions" if self._dimensions else "earlier replies"
            raise EmbeddingError(f"embedding API returned {got}-dimensional vectors but {source} "
                                 f"says {self._dim}; check embedding.model / embedding.dimensions")

    def _post_with_retry(self, payload: dict) -> dict:
        return post_json(self._client, "embeddings", payload, what="embedding API", error=EmbeddingError,
                         max_retries=self._max_retries, backoff_s=self._backoff_s,
                         timeout_s=self._timeout_s)
