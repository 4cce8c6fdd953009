"""Backups of a store on PostgreSQL (shared/store/postgres/backup.py) against the real server:
pg_dump into aokun-<stamp>-<reason>.dump, checked; a restore into a fresh database or over the
store gives back exactly what was dumped (every table but the process rows), with a new
incarnation; a damaged dump, a dump that fails part-way, a script that comes out short and
live workers are refused with nothing changed; retention and backups_holding see dumps;
`aokun backup` and `aokun restore` as real processes on a PostgreSQL config. A restore killed
part-way: tests/process/test_restore_killed.py."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import psycopg
import pytest

from helpers import write_config
from servers import pg_database, pg_store_url  # noqa: F401 (a fixture)
from shared.config import StorageConfig, load_config
from shared.errors import StorageError
from shared.store import backups_holding, open_store, restore
from shared.store.backup import LOCK_NAME, latest_backup, prune_backups, sweep_partials
from shared.store.model.documents import MemoryFields
from shared.store.model.vectors import VectorRow
from shared.store.postgres.dump_reading import check_dump
from shared.units import DAY

BIN = Path(sys.executable).parent
NOW = 1_700_000_000.0
MODEL = "test-model"
# Rows of processes, which a restore drops; the incarnation, which it replaces.
PROCESS_TABLES = ("workers", "fronts", "store_incarnation")
TEXTS = ["Alice keeps bees on her roof", "Bob's locker code is 4711",
         "tabs\tnew\nlines and a back\\slash survive", "爱丽丝在屋顶养蜜蜂", "Carol moved to Lyon"]


def storage(url: str, folder: Path, **more) -> StorageConfig:
    return StorageConfig(backend="postgresql", url=url, data_dir=folder, **more)


@contextmanager
def opened(config: StorageConfig):
    store = open_store(config)
    try:
        yield store
    finally:
        store.close()


def seed(store, texts=TEXTS, now: float = NOW) -> list[int]:
    """Memories with their stage rows, one pinned, each with a vector; a worker and a front
    row as processes running on the store leave them."""
    ids = []
    with store.write() as tx:
        for n, text in enumerate(texts):
            memory_id = tx.documents.insert(text, text.lower(), MemoryFields(persona_id="p", pinned=n == 1,
                                                                             importance=0.25 + (n % 5) / 10),
                                            now + n + 0.123456)
            content_hash = tx.documents.get(memory_id).content_hash
            tx.stages.create_for_memory(memory_id, content_hash, now + n)
            tx.vectors.upsert(VectorRow("document", memory_id, memory_id, MODEL,
                                        np.arange(4, dtype=np.float32) + n, content_hash), now + n)
            ids.append(memory_id)
        tx.runtime.beat("source-worker", os.getpid(), socket.gethostname(), time.time())
        tx.runtime.front_beat("source-front", os.getpid(), socket.gethostname(), "stdio", time.time())
    return ids


def tables(url: str) -> dict[str, list[tuple]]:
    """Every row of every table of the database (bar the process rows and the incarnation),
    in a fixed order: what a restore must give back exactly."""
    with psycopg.connect(url, autocommit=True) as conn:
        names = [row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")]
        found = {}
        for name in names:
            if name in PROCESS_TABLES:
                continue
            width = len(conn.execute(f'SELECT * FROM "{name}" LIMIT 0').description)
            order = ", ".join(str(i) for i in range(1, width + 1))
            found[name] = conn.execute(f'SELECT * FROM "{name}" ORDER BY {order}').fetchall()
        return found


def memories(store, ids: list[int]) -> dict:
    """What a memory is, through the store interface: text, times, pin, stage rows, vector."""
    out = {}
    for memory_id, doc in sorted(store.documents.get_many(ids).items()):
        stages = sorted(tuple(row) for row in store.stages.of_memory(memory_id))
        out[memory_id] = (doc.text, doc.content_hash, doc.create_time, doc.update_time, doc.fields.pinned,
                          doc.fields.importance, doc.fields.persona_id, stages)
    vectors = {}
    for owners, matrix in store.vectors.iter_space("document", MODEL, 4):
        for owner, row in zip(owners.tolist(), matrix.tolist()):
            vectors[owner] = row
    return {"memories": out, "vectors": vectors}


def dump_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


# -- backup and restore ----------------------------------------------------------------------

def test_a_restore_into_a_fresh_database_gives_back_exactly_the_memories(pg_store_url, tmp_path):
    source = storage(pg_store_url, tmp_path / "a")
    with opened(source) as store:
        ids = seed(store)
        before = memories(store, ids)
        source_incarnation = store.incarnation()
        path = store.backup(tmp_path / "backups", NOW, "manual")
    assert re.fullmatch(r"aokun-20231114-221320-000-manual\.dump", path.name)
    # Only the dump and the folder's lock: no partial file, nothing else.
    assert dump_files(tmp_path / "backups") == sorted([LOCK_NAME, path.name])
    assert check_dump(path) == (True, "ok")
    dumped = path.read_bytes()

    with pg_database() as other_url:
        target = storage(other_url, tmp_path / "b")
        assert restore(path, target, []) == re.sub(r"^postgresql://[^@]*@", "", other_url)
        assert tables(other_url) == tables(pg_store_url)  # every row of every table, as it was
        with opened(target) as restored:
            assert memories(restored, ids) == before
            assert sorted(before["memories"]) == ids and len(before["vectors"]) == len(ids)
            assert restored.documents.get(ids[1]).fields.pinned
            assert restored.incarnation() not in (0, source_incarnation)
            # The processes that ran on the source are not taken for live ones here.
            assert restored.runtime.worker_rows() == [] and restored.runtime.front_rows() == []
            # Ids go on after the restored ones (the sequences came back too).
            with restored.write() as tx:
                new = tx.documents.insert("Dave plays chess", "dave plays chess", MemoryFields(), NOW + 100)
            assert new > max(ids)
    assert path.read_bytes() == dumped  # a restore only reads its dump
    with opened(source) as store:  # and the source is as it was
        assert memories(store, ids) == before and len(store.runtime.worker_rows()) == 1


def test_a_restore_over_a_changed_store_puts_it_back_with_a_new_incarnation(pg_store_url, tmp_path):
    config = storage(pg_store_url, tmp_path / "data")
    with opened(config) as store:
        ids = seed(store)
        path = store.backup(tmp_path / "backups", NOW, "daily")
        before, rows_before = memories(store, ids), tables(pg_store_url)
        incarnation = store.incarnation()
        # Changes after the backup: one more memory, one deleted, one unpinned.
        with store.write() as tx:
            later = tx.documents.insert("Erin learns Welsh", "erin learns welsh", MemoryFields(), NOW + 50)
            tx.documents.delete(ids[0])
            tx.documents.set_pinned(ids[1], False, NOW + 60)
        assert memories(store, ids) != before
    # Objects the dump does not have (as a later version might add): the restore replaces the
    # schema's contents, it does not merge into them.
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        conn.execute("CREATE TYPE stray_mood AS ENUM ('calm', 'busy')")
        conn.execute("CREATE TABLE stray (id BIGSERIAL PRIMARY KEY, mood stray_mood, memory_id BIGINT "
                     "REFERENCES documents(id))")
        conn.execute("CREATE VIEW stray_view AS SELECT id FROM stray")
        conn.execute("CREATE FUNCTION stray_count() RETURNS BIGINT LANGUAGE sql AS 'SELECT count(*) FROM stray'")
        conn.execute("CREATE SEQUENCE stray_numbers")
    restore(path, config, [])
    assert tables(pg_store_url) == rows_before
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'stray%' UNION ALL "
                            "SELECT count(*) FROM pg_proc WHERE proname = 'stray_count' UNION ALL "
                            "SELECT count(*) FROM pg_type WHERE typname = 'stray_mood'").fetchall()
    assert left == [(0,), (0,), (0,)]
    with opened(config) as store:
        assert memories(store, ids) == before
        assert store.documents.get_many([later]) == {}
        assert store.incarnation() not in (0, incarnation)
        assert store.runtime.worker_rows() == []


def test_live_workers_are_refused_and_nothing_changes(pg_store_url, tmp_path):
    config = storage(pg_store_url, tmp_path / "data")
    with opened(config) as store:
        seed(store)
        path = store.backup(tmp_path / "backups", NOW, "manual")
        with store.write() as tx:
            tx.documents.insert("Frank fixes bikes", "frank fixes bikes", MemoryFields(), NOW + 9)
        incarnation, rows = store.incarnation(), tables(pg_store_url)
    with pytest.raises(StorageError, match=r"refusing to restore while a worker is running.*worker-1"):
        restore(path, config, ["worker-1"])
    assert tables(pg_store_url) == rows
    with opened(config) as store:
        assert store.incarnation() == incarnation


# -- damaged dumps ---------------------------------------------------------------------------

def damaged_copies(path: Path, folder: Path) -> dict[str, Path]:
    whole = path.read_bytes()
    at = len(whole) - len(whole) // 20  # the table data is the archive's last part
    copies = {"truncated": whole[: len(whole) * 2 // 3],
              "garbage in the data": whole[:at] + b"\x17" * 64 + whole[at + 64:],
              "not a dump": b"hello, I am not an archive\n" * 100,
              "empty": b""}
    made = {}
    folder.mkdir(parents=True, exist_ok=True)
    for n, (name, data) in enumerate(copies.items()):
        made[name] = folder / f"damaged-{n}.dump"
        made[name].write_bytes(data)
    return made


def test_a_damaged_dump_is_refused_and_nothing_changes(pg_store_url, tmp_path):
    config = storage(pg_store_url, tmp_path / "data")
    with opened(config) as store:
        ids = seed(store, TEXTS * 40)  # enough data that the dump has blocks to damage
        path = store.backup(tmp_path / "backups", NOW, "manual")
        with store.write() as tx:
            tx.documents.delete(ids[0])
        incarnation, rows = store.incarnation(), tables(pg_store_url)
    for name, damaged in damaged_copies(path, tmp_path / "damaged").items():
        ok, _detail = check_dump(damaged)
        assert not ok, name
        with pytest.raises(StorageError, match="refusing to restore") as refused:
            restore(damaged, config, [])
        assert "\n" not in str(refused.value), name
        assert tables(pg_store_url) == rows, name
    # A SQLite backup is not restored into a PostgreSQL store (and the reverse): one line each.
    sqlite_backup = tmp_path / "aokun-20240101-000000-000-manual.db"
    sqlite_backup.write_bytes(b"SQLite format 3\0" + b"\0" * 4000)
    with pytest.raises(StorageError, match=r"SQLite backup.*aokun migrate"):
        restore(sqlite_backup, config, [])
    with pytest.raises(StorageError, match=r"PostgreSQL dump.*aokun migrate"):
        restore(path, StorageConfig(data_dir=tmp_path / "sqlite"), [])
    assert not (tmp_path / "sqlite" / "aokun.db").exists()
    assert tables(pg_store_url) == rows
    with opened(config) as store:
        assert store.incarnation() == incarnation


def test_damage_anywhere_in_a_dump_leaves_the_store_whole_or_wholly_restored(pg_store_url, tmp_path):
    """Garbage at points all through the archive: the table of contents (the definitions),
    its framing, the data. No check can see every such damage (a definition's text has no
    checksum), but each restore is refused, or fails and rolls back, or — the damage fell
    where nothing reads it — restores the dump whole: never anything in between."""
    config = storage(pg_store_url, tmp_path / "data")
    with opened(config) as store:
        ids = seed(store, TEXTS * 40)
        path = store.backup(tmp_path / "backups", NOW, "manual")
        dumped = tables(pg_store_url)

    def change() -> None:
        with opened(config) as store:
            store.documents.set_pinned(ids[0], True, NOW + 60)

    change()
    changed = tables(pg_store_url)
    assert changed != dumped
    whole = path.read_bytes()
    outcomes = []
    for n in range(1, 16):
        at = len(whole) * n // 16
        damaged = tmp_path / f"damaged-at-{at}.dump"
        damaged.write_bytes(whole[:at] + b"\x17" * 64 + whole[at + 64:])
        try:
            restore(damaged, config, [])
        except StorageError as exc:
            assert "\n" not in str(exc)
            outcomes.append("refused" if "refusing to restore" in str(exc) else "rolled back")
            assert "refusing to restore" in str(exc) or "rolled back, nothing was changed" in str(exc)
            assert tables(pg_store_url) == changed, at
        else:
            outcomes.append("restored")
            assert tables(pg_store_url) == dumped, at
            change()
    assert "refused" in outcomes, outcomes


def test_a_restore_that_fails_part_way_is_rolled_back_whole(pg_store_url, tmp_path):
    """A dump that passes the check but cannot be loaded to the end (a database with a
    documents table and nothing else: the restore's last steps find no workers table) leaves
    the store exactly as it was — its tables were dropped inside the same transaction."""
    config = storage(pg_store_url, tmp_path / "data")
    with opened(config) as store:
        seed(store)
        incarnation, rows = store.incarnation(), tables(pg_store_url)
    with pg_database() as bare_url:
        with psycopg.connect(bare_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE documents (id BIGINT PRIMARY KEY, text TEXT)")
            conn.execute("INSERT INTO documents VALUES (1, 'an intruder')")
        path = _dump_of(bare_url, tmp_path / "bare-backups")
    assert check_dump(path) == (True, "ok")
    with pytest.raises(StorageError, match="rolled back, nothing was changed") as failed:
        restore(path, config, [])
    assert "\n" not in str(failed.value)
    assert tables(pg_store_url) == rows
    with opened(config) as store:
        assert store.incarnation() == incarnation
        assert len(store.runtime.worker_rows()) == 1  # not even the process rows were touched


def _dump_of(url: str, folder: Path) -> Path:
    """A dump of a database that is no store (the backup module on its own)."""
    from shared.store.postgres.backup import dump_database
    from shared.store.postgres.connection import PgDatabase

    db = PgDatabase(url)
    try:
        return dump_database(db, folder, NOW, "manual")
    finally:
        db.close()


# -- retention, the newest backup, leftovers, backups_holding --------------------------------

def test_retention_prunes_old_dumps_and_sqlite_backups_alike(pg_store_url, tmp_path):
    folder = tmp_path / "backups"
    with opened(storage(pg_store_url, tmp_path / "data")) as store:
        seed(store, TEXTS[:2])
        dumps = [store.backup(folder, NOW + n, "daily") for n in range(3)]
    old_sqlite = folder / "aokun-20231101-000000-000-daily.db"
    old_sqlite.write_bytes(b"SQLite format 3\0")
    now = time.time()
    for n, path in enumerate([old_sqlite, *dumps]):  # ages: 30, 20, 10 and 0 days
        os.utime(path, (now - (3 - n) * 10 * DAY, now - (3 - n) * 10 * DAY))
    assert latest_backup(folder)["path"] == str(dumps[-1])
    removed = prune_backups(folder, keep_days=15, now=now, keep=dumps[-1])
    assert sorted(removed) == sorted([old_sqlite, dumps[0]])
    assert dump_files(folder) == sorted([LOCK_NAME, dumps[1].name, dumps[2].name])
    # keep is never pruned, however old.
    assert prune_backups(folder, keep_days=0, now=now + DAY, keep=dumps[2]) == [dumps[1]]
    assert latest_backup(folder)["path"] == str(dumps[2])


def test_a_leftover_partial_dump_is_swept(pg_store_url, tmp_path):
    folder = tmp_path / "backups"
    folder.mkdir()
    leftover = folder / "aokun-20240101-000000-000-daily.dump.partial"
    leftover.write_bytes(b"PGDMP half written")
    assert sweep_partials(folder) == [leftover]
    leftover.write_bytes(b"PGDMP half written")
    with opened(storage(pg_store_url, tmp_path / "data")) as store:
        seed(store, TEXTS[:1])
        path = store.backup(folder, NOW, "manual")  # sweeps first
    assert dump_files(folder) == sorted([LOCK_NAME, path.name])


def test_backups_holding_reads_the_dumps_documents(pg_store_url, tmp_path):
    folder = tmp_path / "backups"
    with opened(storage(pg_store_url, tmp_path / "data")) as store:
        ids = seed(store)
        docs = store.documents.get_many(ids)
        path = store.backup(folder, NOW, "manual")
        with store.write() as tx:
            after = tx.documents.insert("Gina paints", "gina paints", MemoryFields(), NOW + 99)
        made_later = store.documents.get(after)
    for memory_id, doc in docs.items():
        assert backups_holding(folder, memory_id, doc.content_hash, doc.create_time) == [path.name]
        # Edited since: its earlier version (same id, same creation time) is still held.
        assert backups_holding(folder, memory_id, "0" * 32, doc.create_time) == [path.name]
        assert backups_holding(folder, memory_id, doc.content_hash, 1.0) == [path.name]
        # Same id, another memory (neither its text nor its creation time): not held.
        assert backups_holding(folder, memory_id, "0" * 32, doc.create_time + 0.5) == []
    assert backups_holding(folder, after, made_later.content_hash, made_later.create_time) == []
    assert backups_holding(folder, max(ids) + 1000, docs[ids[0]].content_hash, docs[ids[0]].create_time) == []
    # A damaged dump beside it is left out, not an error.
    (folder / "aokun-20240101-000000-000-daily.dump").write_bytes(b"PGDMP broken")
    doc = docs[ids[2]]
    assert backups_holding(folder, ids[2], doc.content_hash, doc.create_time) == [path.name]


# -- the client programs: missing, of another version, and the password ----------------------

def fake_program(folder: Path, name: str, script: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / name
    program.write_text("#!/bin/sh\n" + script)
    program.chmod(program.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_a_missing_pg_dump_says_so_in_one_line(pg_store_url, tmp_path, monkeypatch):
    with opened(storage(pg_store_url, tmp_path / "data")) as store:
        seed(store, TEXTS[:1])
        monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
        with pytest.raises(StorageError) as missing:
            store.backup(tmp_path / "backups", NOW, "manual")
    message = str(missing.value)
    assert "\n" not in message and message.startswith("pg_dump is not on PATH") and "postgresql-client" in message
    assert not (tmp_path / "backups").exists()


def test_a_pg_dump_of_another_version_says_which_to_install(pg_store_url, tmp_path, monkeypatch):
    programs = tmp_path / "bin"
    fake_program(programs, "pg_dump",
                 'echo "pg_dump: error: aborting because of server version mismatch" >&2\n'
                 'echo "pg_dump: detail: server version: 17.2; pg_dump version: 15.20" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")
    with opened(storage(pg_store_url, tmp_path / "data")) as store:
        seed(store, TEXTS[:1])
        with pytest.raises(StorageError) as mismatch:
            store.backup(tmp_path / "backups", NOW, "manual")
    message = str(mismatch.value)
    assert "\n" not in message
    assert "pg_dump 15.20 cannot backup the PostgreSQL 17.2 server" in message and "install pg_dump 17" in message
    assert dump_files(tmp_path / "backups") == [LOCK_NAME]  # its partial file removed


def test_a_script_that_comes_out_short_without_an_error_is_rolled_back(pg_store_url, tmp_path, monkeypatch):
    """pg_restore's script loses its indexes on the way and nothing says so: before it
    commits, the restore finds tables, indexes or constraints the dump lists missing, and
    rolls back."""
    real = subprocess.run(["which", "pg_restore"], capture_output=True, text=True).stdout.strip()
    fake_program(tmp_path / "bin", "pg_restore",
                 f'case " $* " in *" --file=- "*) "{real}" "$@" | grep -v "^CREATE INDEX" ;; '
                 f'*) exec "{real}" "$@" ;; esac\n')
    config = storage(pg_store_url, tmp_path / "data")
    with opened(config) as store:
        ids = seed(store)
        path = store.backup(tmp_path / "backups", NOW, "manual")
        with store.write() as tx:
            tx.documents.delete(ids[0])
        incarnation, rows = store.incarnation(), tables(pg_store_url)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(StorageError, match="rolled back, nothing was changed: the restored store lacks tables, "
                                           "indexes or constraints the dump lists") as short:
        restore(path, config, [])
    assert "\n" not in str(short.value)
    assert tables(pg_store_url) == rows
    with opened(config) as store:
        assert store.incarnation() == incarnation


def test_the_password_goes_in_the_environment_never_on_the_command_line(pg_store_url, tmp_path, monkeypatch):
    programs, seen = tmp_path / "bin", tmp_path / "seen.txt"
    fake_program(programs, "pg_dump", f'echo "ARGS: $*" > "{seen}"\necho "PGPASSWORD=$PGPASSWORD" >> "{seen}"\n'
                                      'echo "pg_dump: error: stopped by the test" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AOKUN_TEST_STORE_PASSWORD", "s3cret-from-env")
    monkeypatch.delenv("PGPASSWORD", raising=False)
    # Trust authentication takes any password: the store opens with one from its environment variable.
    config = storage(pg_store_url, tmp_path / "data", password_env="AOKUN_TEST_STORE_PASSWORD")
    with opened(config) as store:
        with pytest.raises(StorageError, match="stopped by the test"):
            store.backup(tmp_path / "backups", NOW, "manual")
    args, env = seen.read_text().splitlines()
    assert "s3cret" not in args and "--dbname=" in args
    assert env == "PGPASSWORD=s3cret-from-env"
    # A password written in storage.url is taken out of the connection string too.
    in_url = pg_store_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret-in-url@")
    with opened(storage(in_url, tmp_path / "data")) as store:
        with pytest.raises(StorageError, match="stopped by the test"):
            store.backup(tmp_path / "backups", NOW, "manual")
    args, env = seen.read_text().splitlines()
    assert "s3cret" not in args and env == "PGPASSWORD=s3cret-in-url"


# -- the commands ----------------------------------------------------------------------------

def aokun(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "aokun"), *args], capture_output=True, text=True, timeout=300)


def test_aokun_backup_and_restore_on_a_postgresql_config(pg_store_url, tmp_path):
    config = write_config(tmp_path, storage={"backend": "postgresql", "url": pg_store_url})
    storage_config = load_config(config).storage
    with opened(storage_config) as store:
        ids = seed(store)
        with store.write() as tx:  # the source's processes are gone: no live worker refuses the restore
            tx.runtime.prune_workers(float("inf"))
        before = memories(store, ids)

    made = aokun("backup", "--config", str(config))
    assert made.returncode == 0, made.stderr
    path = Path(made.stdout.strip().splitlines()[-1])
    assert path.parent == tmp_path / "data" / "backups" and path.name.endswith("-manual.dump") and path.is_file()

    with opened(storage_config) as store:
        with store.write() as tx:
            tx.documents.delete(ids[0])
            tx.documents.insert("Hugo sails", "hugo sails", MemoryFields(), NOW + 70)
        incarnation = store.incarnation()
    put_back = aokun("restore", str(path), "--config", str(config))
    assert put_back.returncode == 0, put_back.stderr
    assert put_back.stdout.strip() == f"restored {path} into {storage_config.url.split('@', 1)[1]}"
    with opened(storage_config) as store:
        assert memories(store, ids) == before
        assert store.documents.count() == len(ids)
        assert store.incarnation() != incarnation

    # A live worker on the store: refused, in one line, and nothing changes.
    with opened(storage_config) as store:
        store.runtime.beat("busy-worker", os.getpid(), socket.gethostname(), time.time())
        with store.write() as tx:
            tx.documents.delete(ids[1])
        rows = tables(pg_store_url)
    refused = aokun("restore", str(path), "--config", str(config))
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("aokun restore: refusing to restore while a worker is running")
    assert len(refused.stderr.strip().splitlines()) == 1
    assert tables(pg_store_url) == rows


def test_a_restore_blocked_by_a_running_process_gives_up_and_changes_nothing(pg_store_url, tmp_path):
    """A front still reading (its transaction holds the documents table): the restore waits
    storage.busy_timeout_ms for it, then gives up in one line, rolled back whole."""
    config = storage(pg_store_url, tmp_path / "data", busy_timeout_ms=300)
    with opened(config) as store:
        ids = seed(store)
        path = store.backup(tmp_path / "backups", NOW, "manual")
        with store.write() as tx:
            tx.documents.delete(ids[0])
        incarnation, rows = store.incarnation(), tables(pg_store_url)
    with psycopg.connect(pg_store_url) as reader:  # a transaction left open, as a front mid-read
        reader.execute("SELECT count(*) FROM documents").fetchone()
        with pytest.raises(StorageError,
                           match=r"rolled back, nothing was changed.*lock timeout.*stop every front") as blocked:
            restore(path, config, [])
        assert "\n" not in str(blocked.value)
        reader.rollback()
    assert tables(pg_store_url) == rows
    with opened(config) as store:
        assert store.incarnation() == incarnation
