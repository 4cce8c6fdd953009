"""The embedders themselves: the offline USE model and the OpenAI-compatible client."""

from __future__ import annotations

import numpy as np
import pytest

from fake_openai import FakeEmbeddingsServer
from shared.embedders.local import UseEmbedder
from shared.embedders.openai import OpenAIEmbedder
from shared.errors import EmbeddingError


def test_use_model_runs_offline_and_normalises():
    model = UseEmbedder(threads=1)
    passages = model.embed_passages(["I adopted a grey cat", "我养了一只灰色的猫", "the stock market fell"])
    assert passages.shape == (3, 512) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    # Across languages: the Chinese sentence about a cat is closer than the market news.
    assert passages[0] @ passages[1] > passages[0] @ passages[2]
    assert model.embed_passages([]).shape == (0, 512)


def test_openai_client_retries_server_errors_then_succeeds():
    with FakeEmbeddingsServer(dim=8) as api:
        api.fail_next = 2
        client = OpenAIEmbedder(api.base_url, "m", "sk-1", dimensions=8, batch_size=2,
                                max_retries=3, backoff_s=0.01)
        vectors = client.embed_passages(["a", "b", "c"])
        assert vectors.shape == (3, 8) and api.requests == 4  # 2 failures, then 2 batches
        assert api.last_auth == "Bearer sk-1"
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_openai_client_gives_up_with_a_clear_error():
    with FakeEmbeddingsServer(dim=8) as api:
        api.fail_next = 10
        client = OpenAIEmbedder(api.base_url, "m", "", dimensions=8, max_retries=1, backoff_s=0.01)
        with pytest.raises(EmbeddingError, match="HTTP 500"):
            client.embed_query("x")
    client = OpenAIEmbedder("http://127.0.0.1:9", "m", "", max_retries=0, timeout_s=1)
    with pytest.raises(EmbeddingError, match="cannot reach the embedding API"):
        client.embed_query("x")
