"""One bad memory fails alone: a stage that fails for one memory of a batch runs the others
without it and marks only that one failed (the worker's runner, in this process; with real
worker processes, memory_stats, `aokun doctor`, the panel, `aokun repair` and team mode:
tests/process/test_bad_memory_workers.py). And the atoms stage computes with a memory dated at
the calendar's edge, as rows stored before dates were checked are (9999-12-31 once failed the
atoms stage of every memory in its batch, other users' included, with an OverflowError).

The bad memory here is a row damaged on disk (its topics not JSON), which no stage can read:
the door refuses every input that would make one, dates outside 1900-2200 included
(tests/test_bad_input.py through the MCP client, tests/test_input_rules.py for the service).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from aokun_worker.handlers import AtomsHandler, EmbedHandler
from aokun_worker.runner import RunnerParts, StageRunner
from bad_memories import AT_THE_EDGE, BAD, DAMAGE, DIM, EDGE, MAY, embedding, memorize_all
from fake_openai import FakeEmbeddingsServer
from helpers import store_sql
from shared.assembly import open_services
from shared.config import AppConfig, AtomsConfig, EmbeddingConfig, QueueConfig, StorageConfig
from shared.embedders import build_embedder
from shared.extract.atomize import AtomRules
from shared.extract.timeparse import date_mentions, deadline
from shared.store.model.stages import StageKey


@pytest.fixture
def fake_api():
    with FakeEmbeddingsServer(dim=DIM) as server:
        yield server


def test_the_time_rules_give_no_date_rather_than_raise_at_the_calendars_edge():
    for anchor in (datetime(9999, 12, 31, 12), datetime(1, 1, 1), datetime(9998, 12, 30)):
        for text in ("I will go tomorrow", "I will go next year", "我后天去", "I will go in 3 hours"):
            assert deadline(text, anchor) is None and date_mentions(text, anchor) == []
    for text in ("I will go in 9000 years", "I will go in 99999999 days", "我打算100000个月后去",
                 "I'll call in 3000000000 hours", "I will go in March 0000"):
        assert deadline(text, MAY) is None and date_mentions(text, MAY) == [], text
    # Within the calendar nothing changed.
    assert deadline("I will go tomorrow", MAY) == datetime(2024, 5, 2, 23, 59, 59)
    assert deadline("I will go in 100 years", MAY) == datetime(2124, 5, 1, 23, 59, 59)


def test_a_batch_with_one_bad_memory_completes_the_others_and_fails_only_it(tmp_path):
    services = open_services(AppConfig(storage=StorageConfig(data_dir=tmp_path)), queued=False)
    try:
        docs = memorize_all(services)
        store_sql(services.store, DAMAGE, (docs[BAD].id,))
        store_sql(services.store, AT_THE_EDGE, (docs[EDGE].id,))
        atoms = AtomsHandler(AtomRules.load(None), services.segmenter, AtomsConfig())
        runner = StageRunner(RunnerParts(store=services.store, handlers={"atoms": atoms},
                                         queue=QueueConfig(retry_base_s=5), owner="test-worker"))
        assert runner.run(StageKey(docs[0].id, "atoms", docs[0].content_hash)) == len(docs) - 1
        rows = {r["memory_id"]: (r["status"], r["attempts"], r["last_error"]) for r in store_sql(
            services.store, "SELECT memory_id, status, attempts, last_error FROM memory_stages WHERE stage = 'atoms'")}
        bad = rows.pop(docs[BAD].id)
        assert bad[:2] == ("pending", 1) and bad[2].startswith("JSONDecodeError: "), bad
        assert set(rows.values()) == {("done", 1, None)}
        due = dict(store_sql(services.store, "SELECT memory_id, deadline FROM memory_atoms WHERE type = 'planned'"))
        assert due[docs[EDGE].id] is None  # dated 9999-12-31: its "tomorrow" is no day
        assert due[docs[0].id] == datetime(2024, 5, 2, 23, 59, 59, tzinfo=timezone.utc).timestamp()
    finally:
        services.close()


def test_a_failure_every_memory_shares_fails_the_batch_once(tmp_path, fake_api):
    """The embedding service down is no memory's fault: the batch is not run memory by memory
    (which would ask a dead service once per memory)."""
    services = open_services(AppConfig(storage=StorageConfig(data_dir=tmp_path)), queued=False)
    try:
        docs = memorize_all(services)
        embedder = build_embedder(EmbeddingConfig(**embedding(fake_api)), threads=1)
        runner = StageRunner(RunnerParts(store=services.store, handlers={"embed": EmbedHandler(embedder, 8)},
                                         queue=QueueConfig(retry_base_s=5), owner="test-worker"))
        fake_api.fail_next = 1
        assert runner.run(StageKey(docs[0].id, "embed", docs[0].content_hash)) == 0
        assert fake_api.requests == 1
        errors = [r[0] for r in store_sql(services.store, "SELECT last_error FROM memory_stages WHERE stage = 'embed'")]
        assert len(errors) == len(docs)
        assert all(e.startswith("EmbeddingError: embedding API answered HTTP 500") for e in errors)
    finally:
        services.close()
