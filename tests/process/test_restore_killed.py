"""A restore killed at any moment leaves the store as it was or wholly restored, on both engines.

`aokun restore` runs as a real process and is killed (SIGKILL) at points the test can see, not
guess. On PostgreSQL: held by a lock the test holds — while its transaction waits for the
store's write lock, in the middle of copying the documents, at the first index (a trigger on
the restore's own statements waits for the test's lock) — with the script backed up into
psql's input, and killed there; and with its script cut at a row of the documents, before the
primary keys and among the indexes (a pg_restore that stops at the cut), killed once psql has
run everything up to it. On SQLite: while it copies the backup beside the store, while it
waits for a front that has the store open, and just after its switch. Every table's rows, the
keys and indexes, the process rows and the incarnation are compared, not only the documents.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import psycopg
import pytest

from helpers import wait_for, write_config
from servers import pg_store_url  # noqa: F401 (a fixture)
from shared.config import load_config
from shared.store import open_store, restore
from shared.store.model.documents import MemoryFields
from shared.store.model.vectors import VectorRow
from shared.store.postgres.connection import WRITE_LOCK

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="watches the restore's processes through /proc")

BIN = Path(sys.executable).parent
NOW = 1_700_000_000.0
MODEL = "test-model"
MEMORIES = 300  # about 1.2 MB of script: far more than the pipes and buffers between the programs
PAUSE_KEY = 7_424_242  # the lock a paused restore waits for
PROCESS_TABLES = ("workers", "fronts", "store_incarnation")


# -- a store, its backup, and what it holds --------------------------------------------------

def seed(store) -> list[int]:
    """Memories of about 1 KB with stage rows and vectors, and the row of a worker that has
    stopped (a backup carries it; a restore drops it)."""
    ids = []
    with store.write() as tx:
        for n in range(MEMORIES):
            text = f"note {n}: " + f"Alice keeps bees on her roof and Bob's locker code is {n}. " * 16
            memory_id = tx.documents.insert(text, text.lower(), MemoryFields(persona_id="p"), NOW + n)
            content_hash = tx.documents.get(memory_id).content_hash
            tx.stages.create_for_memory(memory_id, content_hash, NOW + n)
            tx.vectors.upsert(VectorRow("document", memory_id, memory_id, MODEL,
                                        np.arange(4, dtype=np.float32) + n, content_hash), NOW + n)
            ids.append(memory_id)
        tx.runtime.beat("stopped-worker", 999_999, "elsewhere", NOW)
    return ids


def change(store, ids: list[int]) -> None:
    """Make the store differ from its backup: memories deleted, one added."""
    with store.write() as tx:
        for memory_id in ids[:5]:
            tx.documents.delete(memory_id)
        tx.documents.insert("Hugo sails on Sundays", "hugo sails on sundays", MemoryFields(), NOW + 9_000)


def start_restore(backup: Path, config: Path) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "aokun"), "restore", str(backup), "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def killed(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stderr.close()


def child(pid: int, name: str) -> int | None:
    """The pid of `pid`'s child program `name`, if it runs."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            if comm == name and int(rest[1]) == pid:
                return int(entry)
    return None


def waiting_input(pid: int) -> int:
    """How many bytes wait in process `pid`'s standard input (a pipe), not yet read."""
    fd = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NONBLOCK)
    try:
        count = bytearray(4)
        fcntl.ioctl(fd, termios.FIONREAD, count)
        return struct.unpack("i", count)[0]
    finally:
        os.close(fd)


# -- PostgreSQL -------------------------------------------------------------------------------

@dataclass
class PgState:
    rows: dict
    catalog: list
    processes: tuple
    incarnation: int | None


def pg_state(url: str) -> PgState:
    """Every row of every table (bar the process rows and the incarnation), the tables,
    sequences, indexes and constraints, the process rows' count and the incarnation."""
    with psycopg.connect(url, autocommit=True) as conn:
        names = [row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")]
        rows = {}
        for name in names:
            if name not in PROCESS_TABLES:
                width = len(conn.execute(f'SELECT * FROM "{name}" LIMIT 0').description)
                order = ", ".join(str(i) for i in range(1, width + 1))
                rows[name] = conn.execute(f'SELECT * FROM "{name}" ORDER BY {order}').fetchall()
        catalog = conn.execute(
            "SELECT relkind::text, relname::text FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "UNION ALL SELECT 'constraint ' || contype::text, conrelid::regclass::text || ' ' || conname "
            "FROM pg_constraint "
            "WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2").fetchall()
        processes, incarnation = (None, None), None
        if "workers" in names and "fronts" in names:
            processes = conn.execute("SELECT (SELECT count(*) FROM workers), (SELECT count(*) FROM fronts)").fetchone()
        if "store_incarnation" in names:
            found = conn.execute("SELECT value FROM store_incarnation").fetchone()
            incarnation = found[0] if found else None
        return PgState(rows, catalog, tuple(processes), incarnation)


def pg_outcome(now: PgState, before: PgState, dumped: PgState) -> str:
    if now == before:
        return "untouched"
    if (now.rows == dumped.rows and now.catalog == dumped.catalog and now.processes == (0, 0)
            and now.incarnation not in (None, before.incarnation, dumped.incarnation)):
        return "restored"
    differing = sorted(name for name in set(now.rows) | set(before.rows) if now.rows.get(name) != before.rows.get(name))
    counts = {name: (len(before.rows.get(name, [])), len(now.rows.get(name, []))) for name in differing}
    raise AssertionError(f"a half-restored store: rows (before, now) {counts}; "
                         f"{len(before.catalog)} -> {len(now.catalog)} tables, indexes and constraints; "
                         f"processes {before.processes} -> {now.processes}")


def restoring(conn) -> list[tuple]:
    """(wait_event_type, query) of the restore's psql session, while it runs."""
    return conn.execute("SELECT coalesce(wait_event_type, ''), query FROM pg_stat_activity "
                        "WHERE application_name = 'aokun-backup' AND pid <> pg_backend_pid() "
                        "AND backend_type = 'client backend'").fetchall()


def held_at(conn, statement: str) -> bool:
    """Whether the restore's session waits for a lock inside a statement with this text."""
    return any(wait == "Lock" and statement in query for wait, query in restoring(conn))


def frozen(pid: int | None) -> bool:
    """Stop process `pid` where it is (SIGSTOP); whether it was still running."""
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGSTOP)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat[stat.rindex(")") + 2] != "Z"


# Where a restore is held by the test's PAUSE_KEY lock: a trigger the restore's own statements fire.
PAUSE_FUNCTION = f"""
CREATE SCHEMA aokun_test_hooks;
CREATE FUNCTION aokun_test_hooks.pause_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_catalog.pg_advisory_xact_lock_shared({PAUSE_KEY}); RETURN NEW; END $$;
"""
# On the restore's CREATE TABLE of `table`, a row trigger on it that waits at the row where `when`.
PAUSE_IN_COPY = """
CREATE FUNCTION aokun_test_hooks.on_create() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger_ddl_commands() WHERE object_identity = 'public.{table}') THEN
        EXECUTE 'CREATE TRIGGER aokun_test_pause BEFORE INSERT ON public.{table} FOR EACH ROW '
                'WHEN ({when}) EXECUTE FUNCTION aokun_test_hooks.pause_row()';
    END IF;
END $$;
CREATE EVENT TRIGGER aokun_test_on_create ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
    EXECUTE FUNCTION aokun_test_hooks.on_create();
"""
# Before the restore's first statement with this tag whose text matches `pattern`.
PAUSE_AT_DDL = f"""
CREATE FUNCTION aokun_test_hooks.on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_catalog.current_query() ~ '{{pattern}}' THEN
        PERFORM pg_catalog.pg_advisory_xact_lock_shared({PAUSE_KEY});
    END IF;
END $$;
CREATE EVENT TRIGGER aokun_test_on_ddl ON ddl_command_start WHEN TAG IN ('{{tag}}')
    EXECUTE FUNCTION aokun_test_hooks.on_ddl();
"""

MIDDLE = MEMORIES // 2
HELD_AT = {
    # point: (the lock the test holds, hooks that make the restore wait for it, the statement it waits in)
    "waiting for the write lock": (WRITE_LOCK, "", "SELECT pg_advisory_xact_lock"),
    "copying the documents": (PAUSE_KEY, PAUSE_IN_COPY.format(table="documents", when=f"NEW.id = {MIDDLE}"),
                              "COPY public.documents"),
    "creating the indexes": (PAUSE_KEY, PAUSE_AT_DDL.format(tag="CREATE INDEX", pattern="CREATE INDEX"),
                             "CREATE INDEX"),
}


@pytest.fixture
def pg_store(pg_store_url, tmp_path):
    """(config, a backup, the database's state when it was made, its state now: changed since)."""
    config = write_config(tmp_path, storage={"backend": "postgresql", "url": pg_store_url, "busy_timeout_ms": 120_000})
    store = open_store(load_config(config).storage)
    try:
        ids = seed(store)
        backup = store.backup(tmp_path / "backups", NOW, "manual")
        dumped = pg_state(pg_store_url)
        change(store, ids)
    finally:
        store.close()
    before = pg_state(pg_store_url)
    assert before.rows != dumped.rows
    return config, backup, dumped, before


@pytest.mark.parametrize("point", list(HELD_AT))
def test_a_postgresql_restore_killed_while_held_leaves_the_store_as_it_was_or_wholly_restored(pg_store_url, pg_store,
                                                                                            point):
    """The restore held where it is by a lock the test holds, so the script backs up behind
    it into psql's input; `aokun restore` killed there, then the lock released: psql reads
    on to where its input was cut."""
    config, backup, dumped, before = pg_store
    lock, hooks, statement = HELD_AT[point]
    with psycopg.connect(pg_store_url, autocommit=True) as holder:
        holder.execute(PAUSE_FUNCTION + hooks)
        holder.execute("SELECT pg_advisory_lock(%s)", (lock,))
        process = start_restore(backup, config)
        try:
            wait_for(lambda: held_at(holder, statement), timeout=120, interval=0.01, what=f"the restore {point}")
            psql = wait_for(lambda: child(process.pid, "psql"), timeout=60, interval=0.01,
                            what="the restore's psql among its children")
            # Held there, the restore backs up: psql stops reading, and the script waits in its
            # input — unless it has all been written already (the end of the script is short).
            wait_for(lambda: waiting_input(psql) >= 32 * 1024 or child(process.pid, "pg_restore") is None,
                     timeout=120, interval=0.01, what="the script to back up into psql's input")
            # pg_restore stopped while it still runs: the script is certainly cut short.
            restorer = child(process.pid, "pg_restore")
            cut = frozen(restorer)
            killed(process)
            if cut:
                os.kill(restorer, signal.SIGKILL)
        finally:
            if process.poll() is None:
                killed(process)
        holder.execute("SELECT pg_advisory_unlock(%s)", (lock,))
        wait_for(lambda: not restoring(holder), timeout=120, interval=0.02, what="psql to finish its input")
    outcome = pg_outcome(pg_state(pg_store_url), before, dumped)  # raises on anything in between
    if cut:
        assert outcome == "untouched"
    if point != "creating the indexes":
        assert cut  # far from the end of the script: these points really cut it


# pg_restore, whose script (and only that: its other uses run the real one) stops at a cut: before
# the nth line matching PATTERN, closing a COPY it is inside (as psql does at the end of its
# input), with a marker statement the test sees run. It then keeps its output open, writing
# nothing more, until the restore that runs it ends.
STALLED_PG_RESTORE = r"""#!/bin/sh
case " $* " in
  *" --file=- "*)
    "{real}" "$@" | awk -v pattern='{pattern}' -v nth={nth} '
      $0 ~ pattern && ++seen == nth {{ if (copying) print "\\."; print "SELECT 1 AS aokun_test_cut;"; exit }}
      /^COPY / {{ copying = 1 }}
      $0 == "\\." {{ copying = 0 }}
      {{ print }}'
    while kill -0 $PPID 2>/dev/null; do sleep 0.05; done ;;
  *) exec "{real}" "$@" ;;
esac
"""
CUT_AT = {
    # point: (a line of the script the cut comes before, which one of its kind)
    "at a row in the middle of the documents": (f"^{MIDDLE}\t", 1),
    "before the primary keys": ("^-- Name: .*; Type: CONSTRAINT;", 1),
    "among the indexes": ("^-- Name: .*; Type: INDEX;", 3),
}


@pytest.mark.parametrize("point", list(CUT_AT))
def test_a_postgresql_restore_killed_with_its_script_cut_changes_nothing(pg_store_url, pg_store, tmp_path, point):
    """A cut at the end of a statement or a row, which psql takes whole: `aokun restore` is
    killed once psql has run everything up to the cut (and waits for more), so psql's input
    ends there. Nothing of it is committed: not the data without its keys, not the keys
    without all the indexes."""
    config, backup, dumped, before = pg_store
    pattern, nth = CUT_AT[point]
    programs = tmp_path / "bin"
    programs.mkdir()
    fake = programs / "pg_restore"
    fake.write_text(STALLED_PG_RESTORE.format(real=shutil.which("pg_restore"), pattern=pattern, nth=nth))
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{programs}{os.pathsep}{os.environ['PATH']}"}
    process = subprocess.Popen([str(BIN / "aokun"), "restore", str(backup), "--config", str(config)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    with psycopg.connect(pg_store_url, autocommit=True) as watcher:
        try:
            wait_for(lambda: watcher.execute(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = 'aokun-backup' AND "
                "state = 'idle in transaction' AND query LIKE '%aokun_test_cut%'").fetchone(),
                timeout=120, interval=0.01, what="psql to run the script up to the cut")
        finally:
            killed(process)
        wait_for(lambda: not restoring(watcher), timeout=120, interval=0.02, what="psql to reach the end of its input")
    assert pg_outcome(pg_state(pg_store_url), before, dumped) == "untouched"


# -- SQLite ------------------------------------------------------------------------------------

def sqlite_state(path: Path) -> dict:
    """Every row of every table (virtual tables' own tables included), and the schema."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
        rows = {}
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                    "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name").fetchall():
            rows[name] = sorted(conn.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr)
        return {"schema": schema, "rows": rows}
    finally:
        conn.close()


def sqlite_outcome(now: dict, before: dict, restored: dict) -> str:
    if now == before:
        return "untouched"
    if now == restored:
        return "restored"
    differing = {name: (len(before["rows"].get(name, [])), len(now["rows"].get(name, [])))
                 for name in set(now["rows"]) | set(before["rows"])
                 if now["rows"].get(name) != before["rows"].get(name)}
    raise AssertionError(f"a half-restored store: rows (before, now) {differing}")


def staged_copies(data: Path) -> list[Path]:
    return [path for path in data.glob("aokun.db.restore-*") if path.name[-1].isdigit()]


@pytest.fixture
def sqlite_store(tmp_path):
    """(config, the store's file, a backup of it before a change, the state a whole restore
    of that backup gives — made by restoring it, unhindered, into a folder of its own)."""
    config = write_config(tmp_path, storage={"busy_timeout_ms": 120_000})
    storage = load_config(config).storage
    store = open_store(storage)
    try:
        ids = seed(store)
        backup = store.backup(tmp_path / "backups", NOW, "manual")
        change(store, ids)
    finally:
        store.close()
    reference = restore(backup, replace(storage, data_dir=tmp_path / "reference"), [])
    return config, storage.db_path, backup, sqlite_state(reference)


def test_a_sqlite_restore_killed_while_it_copies_changes_nothing(sqlite_store):
    """Killed as soon as its copy beside the store appears (its first step on the store's
    folder). The copy is renamed over the store in the switch: while it is still there, the
    store must be as it was. The next restore removes it, and restores whole."""
    config, db, backup, restored = sqlite_store
    before = sqlite_state(db)
    process = start_restore(backup, config)
    try:
        wait_for(lambda: staged_copies(db.parent) or process.poll() is not None, timeout=60, interval=0.001,
                 what="the restore's copy")
    finally:
        killed(process)
    outcome = sqlite_outcome(sqlite_state(db), before, restored)  # raises on anything in between
    if staged_copies(db.parent):
        assert outcome == "untouched"
    done = subprocess.run([str(BIN / "aokun"), "restore", str(backup), "--config", str(config)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert staged_copies(db.parent) == []
    assert sqlite_outcome(sqlite_state(db), before, restored) == "restored"


def test_a_sqlite_restore_killed_while_a_process_holds_the_store_changes_nothing(sqlite_store):
    """A front still running, with a write in the store's write-ahead log: the restore has its
    copy ready and waits for the store to itself; killed there, nothing of the store changed,
    the front's write included. Given a short busy_timeout_ms it gives up, in one line."""
    config, db, backup, restored = sqlite_store
    front = open_store(load_config(config).storage)
    try:
        with front.write() as tx:
            tx.documents.insert("written by a front still running", "written by a front still running",
                                MemoryFields(), NOW + 9_500)
        assert Path(f"{db}-wal").stat().st_size > 0
        before = sqlite_state(db)
        process = start_restore(backup, config)
        try:
            wait_for(lambda: _copy_ready(db.parent), timeout=60, interval=0.01, what="the restore's copy, ready")
            assert process.poll() is None  # waiting for the store
        finally:
            killed(process)
        assert sqlite_outcome(sqlite_state(db), before, restored) == "untouched"

        config.write_text(config.read_text().replace("busy_timeout_ms: 120000", "busy_timeout_ms: 200"))
        refused = subprocess.run([str(BIN / "aokun"), "restore", str(backup), "--config", str(config)],
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2
        assert refused.stderr.strip() == (f"aokun restore: refusing to restore while another process has {db} "
                                          "open (waited 0.2 s); stop every front and worker on it first")
        assert front.documents.count() == MEMORIES - 5 + 2
    finally:
        front.close()
    assert sqlite_outcome(sqlite_state(db), before, restored) == "untouched"
    assert staged_copies(db.parent) == []


def _copy_ready(data: Path) -> bool:
    """The restore's copy is whole and has its process rows dropped (what it does last
    before it waits for the store)."""
    for path in staged_copies(data):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute("SELECT count(*) FROM workers").fetchone()[0] == 0
            finally:
                conn.close()
        except sqlite3.Error:
            return False
    return False


def test_a_sqlite_restore_killed_just_after_its_switch_is_whole(sqlite_store):
    config, db, backup, restored = sqlite_store
    before = sqlite_state(db)
    queue = db.parent / "queue.db"
    queue.write_bytes(b"")  # a queue file of the old data: gone before the switch
    inode = db.stat().st_ino
    process = start_restore(backup, config)
    try:
        wait_for(lambda: db.stat().st_ino != inode, timeout=60, interval=0.001, what="the switch")
    finally:
        killed(process)
    assert sqlite_outcome(sqlite_state(db), before, restored) == "restored"
    assert not queue.exists()
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-journal").exists()
    # It opens as a store again (in WAL mode), with the backup's memories.
    store = open_store(load_config(config).storage)
    try:
        assert store.documents.count() == MEMORIES
    finally:
        store.close()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()

