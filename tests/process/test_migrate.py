"""`aokun migrate` (moving between engines), the real command: a SQLite store whose memories
the worker's own runner processed in this process (vectors from a fake embeddings API, atoms
and graph from the rules; its periodic jobs run once), copied to a PostgreSQL database of the
test's own and back, checked against the source table by table and through the recall of fronts
built in this process as aokun-server builds them.

The source is made once for the module and copied (its folder) into each test.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import psycopg
import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import all_processed, db_rows, front_in_process, wait_for, write_config
from servers import pg_store_database
from shared.config import ALL_TOOLS

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow

# Every table aokun migrate copies, with its key (what "no duplicates" is checked on).
TABLES = {"documents": "id", "memory_stages": "memory_id, stage", "memory_atoms": "id",
          "graph_nodes": "id", "graph_edges": "id", "graph_entries": "id", "vectors": "kind, owner_id",
          "vector_tombstones": "seq", "memory_context": "memory_id, neighbour_id", "meta": "key",
          "llm_usage": "model", "periodic_runs": "name", "users": "name"}
PEOPLE = ["Alice", "Bob", "Carol", "Dmitri", "Emma", "Farid", "Grace", "Hiro"]
THINGS = ["green tea", "the red kayak", "chess on Sundays", "the Lisbon trip", "sourdough bread"]
QUERIES = ["Alice green tea", "kayak", "chess Sundays", "Lisbon trip", "sourdough", "Hiro"]


@pytest.fixture(scope="module")
def api():
    with FakeEmbeddingsServer(dim=32) as server:
        yield server


def config_at(folder: Path, api: FakeEmbeddingsServer, **storage) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_config(folder, storage={"data_dir": "data", **storage},
                        embedding={"provider": "openai", "base_url": api.base_url, "model": "fake",
                                   "dimensions": api.dim, "api_key": "sk-test"},
                        server={"exposed_tools": list(ALL_TOOLS)})


def memorize_all(config: Path) -> list[int]:
    """Memories in two personas, some pinned, some with an original time, a few edited."""
    from shared.assembly import open_services
    from shared.config import load_config
    from shared.store.model.documents import MemoryFields

    services = open_services(load_config(config), queued=False)
    try:
        ids = []
        for i in range(48):
            person, thing = PEOPLE[i % len(PEOPLE)], THINGS[i % len(THINGS)]
            fields = MemoryFields(persona_id="home" if i % 3 else "work", session_id=f"s{i % 4}",
                                  pinned=i % 7 == 0, topics=(thing,), participants=(person,),
                                  original_time=datetime(2025, 1 + i % 12, 1 + i % 27, tzinfo=timezone.utc)
                                  if i % 2 else None)
            ids.append(services.memories.memorize(f"{person} talked about {thing} (note {i}).", fields).id)
        ids.append(services.memories.memorize("小明喜欢喝咖啡，每天早上都去楼下的咖啡店。",
                                              MemoryFields(persona_id="home")).id)
        return ids
    finally:
        services.close()


def process_all(config: Path) -> None:
    """What a worker does with a new store: every stage of every memory, by the worker's own
    runner, and each periodic job once (their rows are copied too)."""
    from aokun_worker.service import WorkerService
    from shared.assembly import open_services
    from shared.config import load_config
    from shared.store.model.stages import STAGES

    worker = WorkerService(open_services(load_config(config), queued=False))
    try:
        for stage in STAGES:
            while worker.runner.run_next(stage)[0]:
                pass
        assert set(worker.scheduler.run_due()) == {job.name for job in worker.scheduler.jobs}
    finally:
        worker.services.close()


@pytest.fixture(scope="module")
def made_source(tmp_path_factory, api) -> Path:
    """A SQLite store whose memories the worker's runner processed."""
    config = config_at(tmp_path_factory.mktemp("made") / "source", api)
    ids = memorize_all(config)
    process_all(config)
    assert all_processed(config, len(ids))
    assert db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE status != 'done'") == [(0,)]
    return config


@pytest.fixture
def source(made_source, tmp_path, api) -> Path:
    """This test's own copy of the processed source."""
    shutil.copytree(made_source.parent / "data", tmp_path / "source" / "data")
    return config_at(tmp_path / "source", api)


def aokun(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "aokun"), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def pg_rows(url: str, sql: str) -> list[tuple]:
    with psycopg.connect(url, connect_timeout=5) as conn:
        return conn.execute(sql).fetchall()


def sqlite_table(config: Path, table: str) -> list[tuple]:
    return db_rows(config, f"SELECT * FROM {table} ORDER BY {TABLES[table]}")


def counts_sqlite(config: Path) -> dict[str, int]:
    return {table: db_rows(config, f"SELECT COUNT(*) FROM {table}")[0][0] for table in TABLES}


def counts_pg(url: str) -> dict[str, int]:
    return {table: pg_rows(url, f"SELECT COUNT(*) FROM {table}")[0][0] for table in TABLES}


def fulltext_sqlite(config: Path) -> dict[str, list[tuple]]:
    return {"documents": db_rows(config, "SELECT rowid, tokens, context, scope FROM documents_fts ORDER BY rowid"),
            "atoms": db_rows(config, "SELECT rowid, tokens FROM atoms_fts ORDER BY rowid"),
            "graph_entries": db_rows(config, "SELECT rowid, tokens FROM graph_entries_fts ORDER BY rowid")}


def migrated(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("verified"), result.stdout
    return result.stdout


def recalls(config: Path) -> dict[str, list[int]]:
    """Each query's recalled ids through a front on the config."""
    with front_in_process(config) as front:
        return {f"{persona}: {query}": [m["id"] for m in front.ok(
                    "recall", {"query": query, "persona_id": persona})["results"]]
                for query in QUERIES for persona in ("home", "work")}


def test_a_sqlite_store_moves_to_postgresql_whole_and_recalls_the_same(source, tmp_path, api):
    with pg_store_database() as url:
        target = config_at(tmp_path / "pg", api, backend="postgresql", url=url)
        report = migrated(aokun("migrate", "--config", source, "--to", target))
        print(report)
        expected = counts_sqlite(source)  # the migration named the source (meta's store_id)
        assert expected["memory_atoms"] and expected["graph_entries"] and expected["memory_context"]
        assert "recall: 20 of 20 sample queries gave the same top 5" in report
        assert report.count("consistent") == 2, report
        assert counts_pg(url) == expected
        assert pg_rows(url, "SELECT id, text, pinned, persona_id, create_time, original_ts FROM documents"
                            " ORDER BY id") == db_rows(source, "SELECT id, text, pinned, persona_id, create_time,"
                                                               " original_ts FROM documents ORDER BY id")
        assert pg_rows(url, "SELECT kind, owner_id, vector, seq FROM vectors ORDER BY kind, owner_id") == \
            db_rows(source, "SELECT kind, owner_id, vector, seq FROM vectors ORDER BY kind, owner_id")
        fulltext = fulltext_sqlite(source)
        assert pg_rows(url, "SELECT idx, count(*) FROM fulltext_rows GROUP BY idx ORDER BY idx") == \
            [(code, len(fulltext[name])) for code, name in enumerate(fulltext, 1) if fulltext[name]]

        before = recalls(source)
        assert recalls(target) == before
        assert sum(map(len, before.values())) > len(before), "the queries find memories"

        # The PostgreSQL store goes on from the copied ids.
        with front_in_process(target) as front:
            new = front.ok("memorize", {"content": "written after the move",
                                        "metadata": {"persona_id": "home"}})["id"]
        assert new == max(r[0] for r in db_rows(source, "SELECT id FROM documents")) + 1


def test_a_killed_migration_run_again_finishes_without_duplicates(source, tmp_path, api):
    added = aokun("users", "add", "alice", "--personas", "home", "--config", source)
    assert added.returncode == 0, added.stderr
    expected = counts_sqlite(source)
    with pg_store_database() as url:
        target = config_at(tmp_path / "pg", api, backend="postgresql", url=url)
        log = open(tmp_path / "killed.log", "wb")
        killed = subprocess.Popen([str(BIN / "aokun"), "migrate", "--config", str(source), "--to",
                                   str(target), "--batch", "1"], stdout=log, stderr=log)
        log.close()
        try:
            wait_for(lambda: killed.poll() is not None or copied_documents(url) >= 5, 120,
                     what="the first pages copied")
            os.kill(killed.pid, signal.SIGSTOP)
            partial = counts_pg(url)
        finally:
            killed.kill()
            killed.wait()
        assert killed.returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()
        assert 0 < sum(partial.values()) < sum(expected.values()), f"killed after {partial}"

        report = migrated(aokun("migrate", "--config", source, "--to", target))
        print(report, (tmp_path / "killed.log").read_text(errors="replace")[-1500:])
        assert f"documents {expected['documents']} ({expected['documents'] - partial['documents']} new)" in report
        expected = counts_sqlite(source)  # with the store id the first run gave the source
        assert counts_pg(url) == expected
        for table, key in TABLES.items():
            assert pg_rows(url, f"SELECT COUNT(*) FROM (SELECT DISTINCT {key} FROM {table}) k")[0][0] == \
                expected[table], table
        assert pg_rows(url, "SELECT COUNT(*) FROM (SELECT DISTINCT content_hash FROM documents) d")[0][0] == \
            db_rows(source, "SELECT COUNT(DISTINCT content_hash) FROM documents")[0][0]
        assert pg_rows(url, "SELECT name, token_hash, personas, admin, create_time FROM users") == \
            db_rows(source, "SELECT name, token_hash, personas, admin, create_time FROM users")


def copied_documents(url: str) -> int:
    try:
        return pg_rows(url, "SELECT COUNT(*) FROM documents")[0][0]
    except psycopg.errors.UndefinedTable:
        return 0  # the schema is still being made


def test_postgresql_back_to_sqlite_gives_the_source_row_for_row(source, tmp_path, api):
    with pg_store_database() as url:
        middle = config_at(tmp_path / "pg", api, backend="postgresql", url=url)
        migrated(aokun("migrate", "--config", source, "--to", middle))
        back = config_at(tmp_path / "back", api)
        report = migrated(aokun("migrate", "--config", middle, "--to", back))
        assert "recall: 20 of 20" in report
    for table in TABLES:
        assert comparable(table, sqlite_table(back, table)) == comparable(table, sqlite_table(source, table)), table
    assert fulltext_sqlite(back) == fulltext_sqlite(source)
    assert recalls(back) == recalls(source)


def comparable(table: str, rows: list[tuple]) -> list[tuple]:
    """Rows as a round trip through PostgreSQL keeps them: its meta values are doubles, so a
    SQLite store id (62 bits) comes back rounded to 53."""
    if table != "meta":
        return rows
    return [(key, float(value) if key == "store_id" else value) for key, value in rows]


def test_a_target_holding_another_stores_memories_is_refused(source, tmp_path, api):
    other = config_at(tmp_path / "other", api)
    memorize_other = aokun("import", "--config", other,
                           Path(__file__).parents[1] / "data" / "transfer" / "memory.jsonl")
    if memorize_other.returncode != 0:
        pytest.fail(memorize_other.stdout + memorize_other.stderr)
    held = counts_sqlite(other)
    refused = aokun("migrate", "--config", source, "--to", other)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "holds another store's rows" in refused.stderr and "Nothing was copied" in refused.stderr
    assert counts_sqlite(other) == held
    same = aokun("migrate", "--config", source, "--to", source)
    assert same.returncode == 2 and "same store" in same.stderr


def test_a_store_in_use_is_not_copied(source, tmp_path, api):
    """A worker's heartbeat (the worker's own, beating from this process) marks the store in use."""
    from aokun_worker.heartbeat import Heartbeat
    from shared.config import load_config
    from shared.store import open_store

    store = open_store(load_config(source).storage)
    heartbeat = Heartbeat(store)
    heartbeat.start()
    try:
        assert db_rows(source, "SELECT pid FROM workers") == [(os.getpid(),)]
        target = config_at(tmp_path / "target", api)
        refused = aokun("migrate", "--config", source, "--to", target)
    finally:
        heartbeat.stop()
        store.close()
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "in use by 1 worker(s)" in refused.stderr
    assert db_rows(target, "SELECT COUNT(*) FROM documents") in ([], [(0,)])


def test_a_store_made_on_postgresql_moves_to_sqlite_with_its_stages_still_pending(tmp_path, api):
    """A store begun on PostgreSQL has none of the meta rows SQLite's migrations make; its
    memories, never processed, are copied with their stages pending (doctor says so on both)."""
    from helpers import seed_memories

    with pg_store_database() as url:
        native = config_at(tmp_path / "pg", api, backend="postgresql", url=url)
        ids = seed_memories(native, "home", "made on postgres", "pending here and there")
        target = config_at(tmp_path / "sqlite", api)
        report = migrated(aokun("migrate", "--config", native, "--to", target))
        assert report.count("PROBLEM: 6 stages pending") == 2, report
        meta_there = pg_rows(url, "SELECT key, value FROM meta ORDER BY key")
    assert [r[0] for r in db_rows(target, "SELECT id FROM documents ORDER BY id")] == ids
    assert [(k, float(v)) for k, v in sqlite_table(target, "meta")] == [(k, float(v)) for k, v in meta_there]
    assert db_rows(target, "SELECT COUNT(*) FROM memory_stages WHERE status = 'pending'") == [(6,)]


def test_a_copy_that_differs_from_its_source_is_not_verified(source, tmp_path, api):
    target = config_at(tmp_path / "target", api)
    migrated(aokun("migrate", "--config", source, "--to", target))
    # The source changes after the copy: a second run skips the rows already there, so the
    # check must find the copy no longer equal (exit 1), without a count to tell it.
    changed = db_rows(source, "SELECT id FROM documents ORDER BY id LIMIT 1")[0][0]
    import sqlite3
    with sqlite3.connect(source.parent / "data" / "aokun.db") as conn:
        conn.execute("UPDATE documents SET importance = 0.123 WHERE id = ?", (changed,))
    again = aokun("migrate", "--config", source, "--to", target)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "DIFFERENT documents: rows differ from the source's" in again.stdout
    assert "counts: 16 of 16" in again.stdout and again.stdout.strip().endswith("(above)")
    # A memory written in the copy since: running the copy again would mix two stores.
    from helpers import seed_memories
    seed_memories(target, "home", "written in the copy")
    mixed = aokun("migrate", "--config", source, "--to", target)
    assert mixed.returncode == 2, mixed.stdout + mixed.stderr
    assert "written since this copy began" in mixed.stderr
    assert db_rows(target, "SELECT COUNT(*) FROM documents")[0][0] == \
        db_rows(source, "SELECT COUNT(*) FROM documents")[0][0] + 1


def test_a_memory_postgresql_cannot_hold_is_named_in_the_refusal(source, tmp_path, api):
    """A NUL character, which SQLite keeps and PostgreSQL's text cannot: the refusal names the
    memory; once it is removed in the source, the same command finishes the copy."""
    damaged, text = db_rows(source, "SELECT id, text FROM documents ORDER BY id")[5]
    set_text = "UPDATE documents SET text = ? WHERE id = ?"
    sql_at(source, set_text, (text + chr(0), damaged))
    with pg_store_database() as url:
        target = config_at(tmp_path / "pg", api, backend="postgresql", url=url)
        refused = aokun("migrate", "--config", source, "--to", target)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr.strip().splitlines() == [
            f"aokun migrate: memory {damaged}'s text holds a NUL character (U+0000), which the target store"
            " (postgresql) cannot keep: remove it in the source (edit_memory, or the panel) and run migrate"
            " again, which goes on from this page"]
        sql_at(source, set_text, (text, damaged))
        assert "verified" in migrated(aokun("migrate", "--config", source, "--to", target))


def sql_at(config: Path, statement: str, params: tuple) -> None:
    import sqlite3
    with sqlite3.connect(config.parent / "data" / "aokun.db") as conn:
        conn.execute(statement, params)


def test_progress_bars_are_drawn_on_a_terminal_only(source, tmp_path, api):
    """Into a pipe or a log the copy prints its report and no bars; on a terminal, bars."""
    piped = aokun("migrate", "--config", source, "--to", config_at(tmp_path / "piped", api))
    migrated(piped)
    assert piped.stderr == "" and "\r" not in piped.stdout, piped.stderr[-2000:]
    on_terminal = in_terminal([str(BIN / "aokun"), "migrate", "--config", str(source), "--to",
                               str(config_at(tmp_path / "terminal", api))])
    assert "documents: 100%|" in on_terminal and on_terminal.rstrip().endswith("verified"), on_terminal[-2000:]


def in_terminal(command: list[str], timeout: float = 300) -> str:
    """Run a command with a pseudo-terminal as its stdin, stdout and stderr; what it wrote."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a window's size
    proc = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    out, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the terminal closed: every process on it has ended
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=max(1.0, deadline - time.monotonic())) == 0, out.decode(errors="replace")
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    return out.decode(errors="replace")
