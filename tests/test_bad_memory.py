"""One bad memory fails alone: a stage that fails for one memory of a batch runs the others
without it and marks only that one failed, named (its id and its one-line error) in
memory_stats, `aokun doctor` and the panel's queue; `aokun repair --apply` brings back every
memory that is not itself bad. And the atoms stage computes with a memory dated at the
calendar's edge, as rows stored before dates were checked are (9999-12-31 once failed the
atoms stage of every memory in its batch, other users' included, with an OverflowError).

The bad memory here is a row damaged on disk (its topics not JSON), which no stage can read:
the door refuses every input that would make one, dates outside 1900-2200 included
(tests/test_bad_input.py through the MCP client, tests/test_input_rules.py for the service).
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from datetime import datetime, timezone

import httpx
import httpx2
import psycopg
import pytest
from mcp.client.streamable_http import streamable_http_client

from aokun_worker.handlers import AtomsHandler, EmbedHandler
from aokun_worker.runner import RunnerParts, StageRunner
from fake_openai import FakeEmbeddingsServer
from helpers import (
    BIN,
    db_rows,
    free_port,
    http_server,
    mcp_session,
    start_worker,
    stdio_params,
    stop,
    store_sql,
    wait_for,
    write_config,
)
from panel_helpers import panel_process
from servers import REDIS_URL, pg_database, redis_queue_name
from shared.assembly import open_services
from shared.config import ALL_TOOLS, AppConfig, AtomsConfig, EmbeddingConfig, QueueConfig, StorageConfig, load_config
from shared.embedders import build_embedder
from shared.extract.atomize import AtomRules
from shared.extract.timeparse import date_mentions, deadline
from shared.store.model.documents import MemoryFields
from shared.store.model.stages import StageKey

DIM = 16
MAY = datetime(2024, 5, 1, 9, 0)
DAMAGE = "UPDATE documents SET topics = '{not json' WHERE id = ?"
AT_THE_EDGE = "UPDATE documents SET original_time = '9999-12-31T00:00:00' WHERE id = ?"
QUEUE = {"max_retries": 2, "retry_base_s": 0.2, "retry_max_s": 0.5, "reconcile_interval_s": 1.0}
# Planned memories of two users; the second becomes the bad one, the fourth dated 9999-12-31.
TEXTS = [("Alice will fly to Oslo tomorrow", "alice"), ("Alice will call her sister tonight", "alice"),
         ("Bob will meet the dentist on Friday", "bob"), ("Alice will repaint the kitchen tomorrow", "alice"),
         ("Bob is going to run a marathon next month", "bob"), ("Bob will water the plants tomorrow", "bob")]
BAD, EDGE = 1, 3


@pytest.fixture
def fake_api():
    with FakeEmbeddingsServer(dim=DIM) as server:
        yield server


def embedding(api) -> dict:
    return {"provider": "openai", "base_url": api.base_url, "model": "fake-embed", "dimensions": DIM,
            "api_key": "sk-test", "max_retries": 0}


def memorize_all(services) -> list:
    return [services.memories.memorize(text, MemoryFields(persona_id=persona, original_time=MAY))
            for text, persona in TEXTS]


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


# -- a real worker on SQLite -------------------------------------------------------------------


def stage_rows(config) -> dict[tuple[int, str], tuple]:
    return {(m, stage): (status, attempts, error) for m, stage, status, attempts, error in db_rows(
        config, "SELECT memory_id, stage, status, attempts, last_error FROM memory_stages")}


def settled(config, good: list[int], bad: int) -> bool:
    """Every stage of the good memories done, every stage of the bad one failed for good."""
    rows = stage_rows(config)
    return (all(rows[(m, s)][0] == "done" for m in good for s in ("embed", "atoms", "graph"))
            and all(rows[(bad, s)][0] == "failed" for s in ("embed", "atoms", "graph")))


def sql(config, statement: str, params=()) -> None:
    conn = sqlite3.connect(config.parent / "data" / "aokun.db", timeout=30)
    try:
        conn.execute(statement, params)
        conn.commit()
    finally:
        conn.close()


def aokun(config, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "aokun"), *args, "--config", str(config)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_a_worker_fails_only_the_bad_memory_names_it_and_repair_brings_back_the_rest(tmp_path, fake_api):
    config = write_config(tmp_path, embedding=embedding(fake_api), queue=QUEUE,
                          server={"exposed_tools": list(ALL_TOOLS)})
    services = open_services(load_config(config), queued=False)
    try:  # written while no worker runs: its first batch of each stage holds them all
        docs = memorize_all(services)
        store_sql(services.store, DAMAGE, (docs[BAD].id,))
        store_sql(services.store, AT_THE_EDGE, (docs[EDGE].id,))
    finally:
        services.close()
    bad = docs[BAD].id
    good = [d.id for d in docs if d.id != bad]
    worker = start_worker(config)
    try:
        wait_for(lambda: settled(config, good, bad), 60, what="the good memories done, the bad one failed")
        rows = stage_rows(config)
        # The good ones never failed an attempt: the bad one took nobody down.
        assert {rows[(m, s)] for m in good for s in ("embed", "atoms")} == {("done", 1, None)}
        assert rows[(bad, "atoms")][:2] == ("failed", 2) and rows[(bad, "atoms")][2].startswith("JSONDecodeError")
        assert rows[(bad, "graph")][2] == "waits for the atoms stage, which failed"
        assert db_rows(config, "SELECT COUNT(*), COUNT(deadline) FROM memory_atoms WHERE memory_id = ?",
                       (docs[EDGE].id,)) == [(1, 0)]  # the 9999-12-31 memory: its atom, no deadline

        # Named where an operator looks: memory_stats (the real MCP client), doctor, the panel.
        with mcp_session(stdio_params(config)) as session:
            problems = session.ok("memory_stats")["problems"]
        assert {(p["memory_id"], p["stage"], p["status"]) for p in problems} == {
            (bad, stage, "failed") for stage in ("embed", "atoms", "graph")}
        assert all(p["last_error"] for p in problems)
        doctor = aokun(config, "doctor")
        assert doctor.returncode == 1
        assert f"memory {bad}: atoms stage failed after 2 attempt(s): JSONDecodeError: " in doctor.stdout
        assert not any(f"memory {m}:" in doctor.stdout for m in good), doctor.stdout
        with panel_process(config) as (url, token):
            queue = httpx.get(f"{url}/api/queue", cookies={"aokun_panel": token}, timeout=30).json()
        assert {(p["memory_id"], p["stage"]) for p in queue["problems"]} == {
            (bad, stage) for stage in ("embed", "atoms", "graph")}

        # As an older worker left them: good memories failed for good beside the bad one.
        left = good[:3]
        marks = ",".join("?" * len(left))
        sql(config, "UPDATE memory_stages SET status = 'failed', attempts = 8, last_error = 'OverflowError:"
                    f" date value out of range' WHERE stage = 'atoms' AND memory_id IN ({marks})", left)
        sql(config, "UPDATE memory_stages SET status = 'failed', last_error = 'waits for the atoms stage,"
                    f" which failed' WHERE stage = 'graph' AND memory_id IN ({marks})", left)
        repair_time = time.time()
        repaired = aokun(config, "repair", "--apply")
        assert repaired.returncode == 0, repaired.stderr
        assert "9 failed stage(s) set to retry" in repaired.stdout, repaired.stdout  # 3 of the bad one

        def retried() -> bool:
            changed = dict(db_rows(config, "SELECT memory_id, MIN(update_time) FROM memory_stages"
                                           " WHERE stage = 'atoms' GROUP BY memory_id"))
            return settled(config, good, bad) and all(changed[m] > repair_time for m in (*left, bad))

        wait_for(retried, 60, what="the good memories done again, the bad one failed again")
        rows = stage_rows(config)
        assert {rows[(m, s)] for m in left for s in ("atoms", "graph")} == {("done", 1, None)}
        assert rows[(bad, "atoms")][:2] == ("failed", 2) and rows[(bad, "atoms")][2].startswith("JSONDecodeError")
    finally:
        stop(worker)


# -- team mode: PostgreSQL, Redis, two users --------------------------------------------------

ADMIN_TOKEN = "admin-secret-token"


def token_session(url: str, token: str):
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                timeout=httpx2.Timeout(30, read=120))
    return mcp_session(streamable_http_client(url, http_client=client))


def pg(url: str, statement: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
        cur = conn.execute(statement.replace("?", "%s"), params)
        return cur.fetchall() if cur.description else []


def pg_stage_rows(url: str) -> dict[tuple[int, str], tuple]:
    return {(m, stage): (status, attempts, error) for m, stage, status, attempts, error in pg(
        url, "SELECT memory_id, stage, status, attempts, last_error FROM memory_stages")}


@pytest.mark.slow
def test_in_team_mode_alices_bad_memory_does_not_touch_bobs(tmp_path, fake_api):
    with pg_database() as url, redis_queue_name() as (_, queue_name):
        config = write_config(
            tmp_path, storage={"backend": "postgresql", "url": url, "data_dir": "data"},
            queue={**QUEUE, "backend": "redis", "url": REDIS_URL, "name": queue_name},
            embedding=embedding(fake_api), server={"token": ADMIN_TOKEN, "exposed_tools": list(ALL_TOOLS)})
        tokens = {}
        for user in ("alice", "bob"):
            added = aokun(config, "users", "add", user, "--personas", user)
            assert added.returncode == 0, added.stderr
            tokens[user] = added.stdout.strip()
        ids = []
        with http_server(config, free_port()) as front:  # no worker yet: one batch holds them all
            for text, persona in TEXTS:
                with token_session(front, tokens[persona]) as user:
                    ids.append(user.ok("memorize", {"content": text, "metadata": {
                        "persona_id": persona, "original_time": MAY.isoformat()}})["id"])
            with token_session(front, tokens["alice"]) as alice:  # the door, in team mode too
                refused = alice.error("memorize", {"content": "Alice will sail tomorrow",
                                                   "metadata": {"original_time": "9999-12-31"}})
                assert refused.startswith("original_time: 9999-12-31T00:00:00 is out of range: give a time in"
                                          " the years 1900 to 2200 (UTC)"), refused
            pg(url, DAMAGE, (ids[BAD],))
            pg(url, AT_THE_EDGE, (ids[EDGE],))
            bad = ids[BAD]
            good = [m for m in ids if m != bad]
            bobs = [m for m, (_, persona) in zip(ids, TEXTS) if persona == "bob"]
            worker = start_worker(config)
            try:
                def settled() -> bool:
                    rows = pg_stage_rows(url)
                    return (all(rows[(m, s)][0] == "done" for m in good for s in ("embed", "atoms", "graph"))
                            and all(rows[(bad, s)][0] == "failed" for s in ("embed", "atoms", "graph")))

                wait_for(settled, 90, what="alice's bad memory failed, everything else done")
                rows = pg_stage_rows(url)
                assert {rows[(m, s)] for m in bobs for s in ("embed", "atoms", "graph")} == {("done", 1, None)}
                assert rows[(bad, "atoms")][:2] == ("failed", 2)
                assert rows[(bad, "atoms")][2].startswith("JSONDecodeError: ")
                with token_session(front, tokens["bob"]) as bob:
                    found = bob.ok("recall", {"query": "when does Bob meet the dentist"})["results"]
                    assert found[0]["id"] == bobs[0]
                with token_session(front, ADMIN_TOKEN) as admin:
                    problems = admin.ok("memory_stats")["problems"]
                assert {(p["memory_id"], p["stage"]) for p in problems} == {
                    (bad, stage) for stage in ("embed", "atoms", "graph")}
                doctor = aokun(config, "doctor")
                assert f"memory {bad}: atoms stage failed after 2 attempt(s): JSONDecodeError: " in doctor.stdout
            finally:
                stop(worker)
