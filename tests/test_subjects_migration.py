"""A store made before atoms had subjects gets them: the schema migration puts the atoms stage
of such memories back in the stage journal, and the worker's own runner derives their atoms
again, on SQLite and PostgreSQL.

The old store is made the way the old code left it: its memories memorized through the official
MCP client (the front in this process) and derived, then the subjects taken off the atoms in
the store's own SQL (none on a plain fact, the self on a slot fact whoever it was about, the
wife's move superseding the user's own home) and the migration unrecorded.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import front_in_process, run_every_stage, write_config
from servers import storage_of
from shared.config import load_config
from shared.store import open_store

# The migration that re-derives atoms without subjects, per engine.
MIGRATION = {"sqlite": 13, "postgresql": 3}
MEMORIES = ["I live in Toronto.", "My wife Sarah loves orchids.", "I love hiking in the mountains.",
            "My wife Sarah moved to Boston."]
BEFORE_SUBJECTS = [
    "UPDATE memory_atoms SET subject = NULL WHERE attribute IS NULL",
    "UPDATE memory_atoms SET subject = 'self' WHERE attribute IS NOT NULL",
    # The old code read the wife's move as the user's: it superseded the user's home.
    "UPDATE memory_atoms SET state = 'superseded', superseded_by = (SELECT b.id FROM memory_atoms b"
    " WHERE b.value = 'boston') WHERE value = 'toronto'",
]


def config_for(tmp_path: Path, api, storage: dict) -> Path:
    return write_config(
        tmp_path, storage=storage,
        embedding={"provider": "openai", "base_url": api.base_url, "model": "fake", "dimensions": 32},
        server={"exposed_tools": ["memorize", "search_atoms"]},
        retrieval={"access_reinforcement": False, "cache_enabled": False})


def below_the_store(engine: str, config: Path, statements: list[str]) -> None:
    """Statements on the store's database, on a connection of their own (test setup)."""
    storage = load_config(config).storage
    if engine == "sqlite":
        conn = sqlite3.connect(storage.db_path, timeout=30, isolation_level=None)
        try:
            for statement in statements:
                conn.execute(statement)
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(storage.url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def atoms_by_text(config: Path) -> dict[str, tuple[str | None, str]]:
    with front_in_process(config) as s:
        atoms = s.ok("search_atoms", {"query": "Toronto orchids hiking Boston", "persona_id": "me",
                                      "k": 10})["atoms"]
    return {a["text"]: a["subject"] for a in atoms}


@contextmanager
def stage_rows(config: Path):
    store = open_store(load_config(config).storage)
    try:
        yield lambda memory_id: {r["stage"]: r["status"] for r in store.stages.of_memory(memory_id)}
    finally:
        store.close()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_atoms_made_before_subjects_get_them_once_the_worker_runs(tmp_path, engine):
    with FakeEmbeddingsServer(dim=32) as api, storage_of(engine) as storage:
        config = config_for(tmp_path, api, storage)
        with front_in_process(config) as s:
            ids = [s.ok("memorize", {"content": text, "metadata": {"persona_id": "me"}})["id"]
                   for text in MEMORIES]
        run_every_stage(config)
        below_the_store(engine, config, [*BEFORE_SUBJECTS, "DELETE FROM schema_migrations WHERE version"
                                         f" = {MIGRATION[engine]}"])
        assert "I live in Toronto." not in atoms_by_text(config)  # superseded by the wife's move

        with stage_rows(config) as stages:  # opening the store migrates it
            assert [stages(i)["atoms"] for i in ids] == ["pending"] * len(ids)
            assert [stages(i)["graph"] for i in ids] == ["done"] * len(ids)  # until the atoms are
        run_every_stage(config)
        assert atoms_by_text(config) == {
            "I live in Toronto.": "self", "My wife Sarah loves orchids.": "Sarah (wife)",
            "I love hiking in the mountains.": "self", "My wife Sarah moved to Boston.": "Sarah (wife)"}
