"""One bad memory fails alone, with real worker processes: a worker whose first batch of each
stage holds a memory no stage can read (its topics not JSON) completes the others, marks only
that one failed, named in memory_stats (the official MCP client over stdio), `aokun doctor` and
the panel process's queue; `aokun repair --apply` brings back every memory that is not itself
bad. In team mode (PostgreSQL, Redis, an HTTP front, two users) Alice's bad memory does not
touch Bob's. tests/test_bad_memory.py: the same failure with the worker's runner in the test
process."""

from __future__ import annotations

import sqlite3
import subprocess
import time

import httpx
import httpx2
import psycopg
import pytest
from mcp.client.streamable_http import streamable_http_client

from bad_memories import AT_THE_EDGE, BAD, DAMAGE, DIM, EDGE, MAY, TEXTS, embedding, memorize_all
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
from shared.config import ALL_TOOLS, load_config

QUEUE = {"max_retries": 2, "retry_base_s": 0.2, "retry_max_s": 0.5, "reconcile_interval_s": 1.0}


@pytest.fixture
def fake_api():
    with FakeEmbeddingsServer(dim=DIM) as server:
        yield server


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
        # The graph stage reads both the atoms and the vectors: it fails with whichever failed first.
        assert rows[(bad, "graph")][2] in ("waits for the atoms stage, which failed",
                                           "waits for the embed stage, which failed")
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
