"""The store interface's conformance suite, for every engine (shared/store/interface.py):
the engines it runs on, a fresh store per test, and the helpers its files share
(tests/test_store_conformance*.py).

The suite uses only `open_store` and the interface's methods: no module function, no SQL,
no connection, so that the same tests hold a second engine to the same behaviour. An engine
is one branch of `storage_for` and one entry in ENGINES.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

from servers import pg_store_database
from shared.config import StorageConfig
from shared.store import open_store
from shared.store.model.documents import DocumentFilter, MemoryFields
from shared.store.model.stages import StageKey

ENGINES = ["sqlite", "postgresql"]
NOW = 1_700_000_000.0
DAY = 86_400.0
ALL = DocumentFilter(include_archived=True)


def storage_for(engine: str, tmp_path: Path, resources: ExitStack) -> StorageConfig:
    """A fresh, empty store of the engine (a new engine: one more branch here); what it
    needs (a database of its own) is released by `resources`."""
    if engine == "sqlite":
        return StorageConfig(data_dir=tmp_path / "data")
    if engine == "postgresql":
        url = resources.enter_context(pg_store_database())
        return StorageConfig(backend="postgresql", url=url, data_dir=tmp_path / "data")
    raise AssertionError(f"no test store for engine {engine!r}")


@pytest.fixture(params=ENGINES)
def opened(request, tmp_path):
    """(a fresh store of each engine, the storage config it was opened with)."""
    with ExitStack() as resources:
        storage = storage_for(request.param, tmp_path, resources)
        store = open_store(storage)
        resources.callback(store.close)
        yield store, storage


@pytest.fixture
def store(opened):
    return opened[0]


def add(store, text: str, now: float = NOW, context: str = "", stages: bool = True, **fields) -> int:
    """A memory (its tokens: its words) with its stage rows, in one write."""
    with store.write() as tx:
        memory_id = tx.documents.insert(text, text.lower(), MemoryFields(**fields), now, context)
        if stages:
            tx.stages.create_for_memory(memory_id, tx.documents.get(memory_id).content_hash, now)
    return memory_id


def key(store, memory_id: int, stage: str = "embed") -> StageKey:
    return StageKey(memory_id, stage, store.documents.get(memory_id).content_hash)


def in_threads(*calls):
    """Run each call on a thread of its own, at once; their results in order."""
    with ThreadPoolExecutor(len(calls)) as pool:
        return [f.result() for f in [pool.submit(call) for call in calls]]
