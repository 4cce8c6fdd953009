"""Failure paths of the database layer that must end, clearly: connections that die with their
thread, read-only data_dirs that recover, disk full, lock timeouts, damage, unwritable data_dir."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import BIN, db_rows, free_port, http_server, mcp_session, stdio_params, wait_for, write_config
from shared.errors import StorageError
from shared.store.sqlite.db import Database

NOBODY = 65534  # nobody / nogroup on Debian


def open_fds(path: Path, pid: str = "self") -> int:
    """How many descriptors process `pid` holds on `path` itself (not its -wal or -shm)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}") == str(path)
        except OSError:
            pass  # closed between listing and reading
    return count


def notes_db(path: Path, busy_timeout_ms: int = 10_000) -> Database:
    database = Database(path, busy_timeout_ms=busy_timeout_ms)
    with database.write() as tx:
        tx.execute("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    return database


@pytest.fixture
def db(tmp_path):
    database = notes_db(tmp_path / "data" / "aokun.db")
    yield database
    database.close()


def run_threads(count: int, target) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_connections_close_with_their_threads(db):
    """A thread pool that retires threads must not leave their connections open."""
    errors = []
    ready, release = threading.Barrier(11), threading.Event()

    def use(i: int) -> None:
        try:
            with db.write() as tx:
                tx.execute("INSERT INTO notes (body) VALUES (?)", (f"note {i}",))
            db.connection().execute("SELECT COUNT(*) FROM notes").fetchone()
            if i < 10:  # the first wave holds its threads alive until counted
                ready.wait(timeout=30)
                release.wait(timeout=30)
        except Exception as exc:  # collected for the assertion
            errors.append(exc)
            ready.abort()

    wal = db.path.with_name("aokun.db-wal")
    wave = threading.Thread(target=run_threads, args=(10, use))
    wave.start()
    ready.wait(timeout=30)
    alive = open_fds(db.path), open_fds(wal)
    release.set()
    wave.join()
    for _ in range(20):  # 200 more short-lived threads, 10 at a time
        run_threads(10, lambda i: use(10 + i))
    after = open_fds(db.path), open_fds(wal)
    assert not errors, errors
    assert min(alive) >= 11, f"11 live connections hold only {alive} descriptors: the count is wrong"
    # A closed connection's WAL descriptor closes at once. SQLite keeps the database file's
    # descriptor for reuse while other connections of the process hold locks on the file
    # (closing it would drop theirs), so that count stays at the peak of live connections.
    assert after[1] <= 1, f"{after[1]} WAL descriptors after 210 threads ended: connections leak"
    assert after[0] <= alive[0], f"{after[0]} database descriptors: more than the peak {alive[0]}"
    assert db.connection().execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 210
    db.close()
    assert open_fds(db.path) == open_fds(wal) == 0


def test_close_closes_connections_of_live_threads(db):
    opened, finish = threading.Event(), threading.Event()
    outcome = {}

    def hold() -> None:
        db.connection().execute("SELECT 1").fetchone()
        opened.set()
        finish.wait(timeout=30)
        with db.write() as tx:  # after close(): a new connection, working
            tx.execute("INSERT INTO notes (body) VALUES ('after close')")
        outcome["rows"] = db.connection().execute("SELECT COUNT(*) FROM notes").fetchone()[0]

    thread = threading.Thread(target=hold)
    thread.start()
    opened.wait(timeout=30)
    assert open_fds(db.path) == 2
    db.close()
    assert open_fds(db.path) == 0
    finish.set()
    thread.join()
    assert outcome == {"rows": 1}


def test_disk_full_says_so_and_keeps_what_was_committed(db):
    """SQLite's own SQLITE_FULL (max_page_count): it has rolled back already, and our ROLLBACK
    must not replace its error with "cannot rollback - no transaction is active"."""
    with db.write() as tx:
        tx.execute("INSERT INTO notes (body) VALUES ('kept')")
    conn = db.connection()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StorageError) as failure:
        with db.write() as tx:
            tx.execute("INSERT INTO notes (body) VALUES (?)", ("x" * 200_000,))
    message = str(failure.value)
    assert failure.value.kind == "full"
    assert f"the disk holding data_dir ({db.path.parent}) is full" in message
    assert "nothing was stored" in message and "\n" not in message
    assert "rollback" not in message
    assert isinstance(failure.value.__cause__, sqlite3.OperationalError)
    assert failure.value.__cause__.sqlite_errorname == "SQLITE_FULL"
    assert not conn.in_transaction
    conn.execute("PRAGMA max_page_count = 1073741823")
    with db.write() as tx:
        tx.execute("INSERT INTO notes (body) VALUES ('after')")
    assert [r[0] for r in conn.execute("SELECT body FROM notes ORDER BY id")] == ["kept", "after"]


def test_lock_held_past_busy_timeout_names_the_setting(tmp_path):
    db = notes_db(tmp_path / "aokun.db", busy_timeout_ms=200)
    assert db.connection().execute("PRAGMA busy_timeout").fetchone()[0] == 200  # the setting, not the default
    other = sqlite3.connect(db.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(StorageError) as failure:
            with db.write() as tx:
                tx.execute("INSERT INTO notes (body) VALUES ('never')")
        waited = time.monotonic() - started
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert failure.value.kind == "locked"
    assert "longer than storage.busy_timeout_ms (200 ms); retry" in str(failure.value)
    assert waited >= 0.15  # it waited for the lock (a deferred write would fail at once)
    with db.write() as tx:  # the lock gone, the same thread writes again
        tx.execute("INSERT INTO notes (body) VALUES ('later')")
    db.close()


def test_damaged_database_points_at_doctor(tmp_path):
    path = tmp_path / "aokun.db"
    path.write_bytes(b"this is not a database at all " * 200)
    with pytest.raises(StorageError) as failure:
        Database(path).connection()
    assert failure.value.kind == "corrupt"
    assert str(path) in str(failure.value) and "aokun doctor" in str(failure.value)


def test_data_dir_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(StorageError) as failure:
        Database(blocker / "data" / "aokun.db").connection()
    assert str(failure.value).startswith(f"cannot create data_dir {blocker / 'data'}: ")
    assert "\n" not in str(failure.value)


@pytest.mark.parametrize("program", ["aokun-server", "aokun-worker"])
def test_entry_points_report_an_uncreatable_data_dir_in_one_line(tmp_path, program):
    (tmp_path / "a-file").write_text("not a folder")
    config = write_config(tmp_path, storage={"data_dir": str(tmp_path / "a-file" / "data")})
    done = subprocess.run([str(BIN / program), "--config", str(config)], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1 and str(tmp_path / "a-file" / "data") in lines[0], lines


READ_ONLY_CHILD = textwrap.dedent("""
    import json, queue, sys, threading
    from pathlib import Path
    from shared.errors import StorageError
    from shared.store.sqlite.db import Database

    data = Path(sys.argv[1])
    db = Database(data / "aokun.db", busy_timeout_ms=5000)

    def insert(body):
        try:
            with db.write() as tx:
                tx.execute("INSERT INTO notes (body) VALUES (?)", (body,))
            return "stored"
        except Exception as exc:
            return f"{getattr(exc, 'kind', type(exc).__name__)}: {exc}"

    def count(_=None):
        return db.connection().execute("SELECT COUNT(*) FROM notes").fetchone()[0]

    def set_modes(files, folder):
        for path in data.glob("aokun.db*"):
            path.chmod(files)
        data.chmod(folder)

    class PoolThread(threading.Thread):
        # Runs every job on one thread, as a pool thread does, so it keeps its connection.
        def __init__(self):
            super().__init__(daemon=True)
            self.jobs = queue.Queue()
            self.start()

        def run(self):
            while True:
                job, arg, answer = self.jobs.get()
                answer.put(job(arg))

        def do(self, job, arg=None):
            answer = queue.Queue()
            self.jobs.put((job, arg, answer))
            return answer.get(timeout=60)

    with db.write() as tx:
        tx.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    seen = {"before": insert("before")}
    set_modes(0o444, 0o555)
    reader, writer = PoolThread(), PoolThread()
    seen["read while read-only"] = reader.do(count)
    seen["write while read-only"] = writer.do(insert, "refused")
    set_modes(0o644, 0o755)
    seen["reader writes after"] = reader.do(insert, "reader after")
    seen["writer writes after"] = writer.do(insert, "writer after")
    seen["rows"] = [r[0] for r in db.connection().execute("SELECT body FROM notes ORDER BY id")]
    print(json.dumps(seen))
""")


@contextmanager
def unprivileged_child():
    """A folder, and a command prefix running a child for which file permissions hold: root
    ignores them, so as root the child runs as nobody (setpriv, from util-linux)."""
    folder = Path(tempfile.mkdtemp(prefix="aokun-ro-"))  # not under pytest's 0700 root folder
    try:
        if os.geteuid() != 0:
            yield folder, []
            return
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root, where permissions do not hold, and setpriv (util-linux)"
                        " is missing to run the child as nobody")
        os.chown(folder, NOBODY, NOBODY)
        prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        probe = subprocess.run([*prefix, sys.executable, "-c", "import shared.store.sqlite.db"],
                               cwd=folder, capture_output=True, text=True, timeout=60)
        if probe.returncode != 0:
            pytest.skip("running as root, where permissions do not hold, and uid 65534 (nobody) "
                        f"cannot run this Python and import the project: {probe.stderr.strip()[-200:]}")
        yield folder, prefix
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_read_only_data_dir_fails_clearly_and_recovers_without_restart():
    """A connection opened while data_dir was read-only stays read-only in SQLite; after the
    permissions return, every thread must write again, without a restart."""
    with unprivileged_child() as (folder, prefix):
        data = folder / "data"
        done = subprocess.run([*prefix, sys.executable, "-c", READ_ONLY_CHILD, str(data)],
                              cwd=folder, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
    assert seen["before"] == "stored"
    assert seen["read while read-only"] == 1
    refused = seen["write while read-only"]
    assert refused.startswith(f"read_only: data_dir {data} is read-only: "), refused
    assert "nothing was stored" in refused
    assert seen["reader writes after"] == "stored"
    assert seen["writer writes after"] == "stored"
    assert seen["rows"] == ["before", "reader after", "writer after"]


@pytest.mark.parametrize("program", ["aokun-server", "aokun-worker"])
def test_entry_points_report_a_data_dir_they_cannot_write_in_one_line(program):
    with unprivileged_child() as (folder, prefix):
        data_dir = folder / "not-yours"
        data_dir.mkdir(mode=0o755)  # owned by the test's user, not the child's (when root)
        if not prefix:
            data_dir.chmod(0o555)
        config = write_config(folder, storage={"data_dir": str(data_dir)})
        done = subprocess.run([*prefix, str(BIN / program), "--config", str(config)], cwd=folder,
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        data_dir.chmod(0o755)
    assert done.returncode == 2, done.stderr
    # The loader refuses it before anything opens it (shared/config.py folder_problem).
    assert done.stderr.strip() == (f"{program}: storage.data_dir {data_dir} is not writable by this "
                                   "user; make it writable for this user or choose another folder")


@contextmanager
def small_filesystem(folder: Path, size: str):
    """A tmpfs of `size` mounted on folder (root only; skips where mounting is not allowed)."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill for real: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the filesystem holding folder, then free `leave` bytes; return the filler file."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as out:  # unbuffered: nothing left to fail at close
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def test_full_disk_fails_the_commit_clearly_and_loses_nothing(tmp_path):
    """A real ENOSPC: the COMMIT fails writing the WAL, SQLite rolls back by itself, and the
    error that reaches the caller is "full", not our own ROLLBACK's complaint."""
    with small_filesystem(tmp_path / "small", "2m") as folder:
        db = notes_db(folder / "aokun.db")
        filler = fill(folder, leave=64 * 1024)
        stored, failure = [], None
        for i in range(2000):
            try:
                with db.write() as tx:
                    tx.execute("INSERT INTO notes (body) VALUES (?)", (f"note {i} " + "x" * 3000,))
                stored.append(i)
            except StorageError as exc:
                failure = exc
                break
        assert failure is not None, "2000 writes of 3 KB fitted in 64 KB"
        assert stored, "not one write fitted in 64 KB: nothing acknowledged to check"
        assert failure.kind == "full" and "rollback" not in str(failure), str(failure)
        assert str(failure) == (f"the disk holding data_dir ({folder}) is full: free space and "
                                "retry; nothing was stored")
        conn = db.connection()
        assert not conn.in_transaction
        bodies = [r[0] for r in conn.execute("SELECT body FROM notes ORDER BY id")]
        assert bodies == [f"note {i} " + "x" * 3000 for i in stored]
        filler.unlink()
        with db.write() as tx:
            tx.execute("INSERT INTO notes (body) VALUES ('after freeing space')")
        assert conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == len(stored) + 1
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        db.close()


@pytest.mark.slow
def test_memorize_on_a_full_disk_says_so_and_keeps_every_acknowledged_memory(tmp_path):
    """Through a real aokun-server over stdio: the client reads "full", not a bare "Error
    executing tool memorize", and every memory it was told is stored is there, exactly."""
    with small_filesystem(tmp_path / "small", "8m") as folder:
        config = write_config(tmp_path, storage={"data_dir": str(folder / "data")})
        acknowledged = {}
        with mcp_session(stdio_params(config)) as session:
            for i in range(3):
                stored = session.ok("memorize", {"content": f"memory {i}, before the disk filled"})
                acknowledged[stored["id"]] = stored["text"]
            filler = fill(folder, leave=512 * 1024)
            message = None
            for i in range(300):
                result = session.call("memorize", {"content": f"memory {i} as the disk fills " + "y" * 4000})
                if result.is_error:
                    message = result.content[0].text
                    break
                acknowledged[result.structured_content["id"]] = result.structured_content["text"]
            assert message is not None, "300 memories of 4 KB fitted in 512 KB"
            assert len(acknowledged) > 3, "not one memory fitted in 512 KB: nothing acknowledged to check"
            assert "full" in message and "\n" not in message, message
            assert str(folder / "data") in message, message
            filler.unlink()
            stored = session.ok("memorize", {"content": "after freeing space"})
            acknowledged[stored["id"]] = stored["text"]
        assert dict(db_rows(config, "SELECT id, text FROM documents")) == acknowledged


def server_pid(config: Path) -> str:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(config).encode() in argv and any(a.endswith(b"aokun-server") for a in argv):
            return pid
    raise AssertionError(f"no aokun-server process for {config}")


# anyio's thread pool retires a thread idle for WorkerThread.MAX_IDLE_TIME (10 s) when the
# next call comes; the front under test runs with 1 s (set at its start-up by this
# sitecustomize), so an idle spell past the limit is 1.5 s rather than 11.
ANYIO_IDLE_S = 1.0
SHORT_IDLE = f"""
from anyio._backends._asyncio import WorkerThread
WorkerThread.MAX_IDLE_TIME = {ANYIO_IDLE_S}
"""


@pytest.mark.slow
def test_http_front_closes_the_connections_of_retired_pool_threads(tmp_path):
    """The SDK runs tools on anyio's thread pool, which retires threads idle past its limit
    when the next call comes. Bursts of calls separated by idle time must not pile up connections."""
    # Threads other than the pool's hold connections too: the heartbeat thread opens its own
    # at its first beat after start-up and keeps it as long as the front runs, so the test
    # waits for that beat (every 0.5 s here) before counting. The long busy timeout lets a
    # burst's calls wait for the test's write lock rather than fail.
    config = write_config(tmp_path, worker={"heartbeat_interval_s": 0.5},
                          storage={"busy_timeout_ms": 120_000})
    db = tmp_path / "data" / "aokun.db"
    wal = db.with_name("aokun.db-wal")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SHORT_IDLE, encoding="utf-8")

    def calls(session, size: int, failures: list[str]) -> None:
        def one(i: int) -> None:
            result = session.call("memorize", {"content": f"burst call {i} at {time.time()}"})
            if result.is_error:
                failures.append(result.content[0].text)

        run_threads(size, one)

    def burst(session, pid: str, size: int, held: bool) -> None:
        """`size` calls at once. When `held`, the test holds the database's write lock until
        the front has `size` connections open, each call waiting for the lock in a pool
        thread of its own: the burst takes that many threads however the calls are scheduled."""
        failures: list[str] = []
        if not held:
            calls(session, size, failures)
        else:
            lock = sqlite3.connect(db, isolation_level=None)
            sending = threading.Thread(target=calls, args=(session, size, failures))
            try:
                lock.execute("BEGIN IMMEDIATE")
                sending.start()
                wait_for(lambda: open_fds(wal, pid) >= size, 60, what=f"{size} calls waiting in the front")
            finally:
                lock.close()  # rolls the empty transaction back: the calls go on
                if sending.is_alive():
                    sending.join()
        assert not failures, failures

    with http_server(config, free_port(), env={"PYTHONPATH": str(tmp_path / "site")}) as url, \
            mcp_session(url) as session:
        pid = server_pid(config)
        wait_for(lambda: db_rows(config, "SELECT 1 FROM fronts WHERE pid = ? AND heartbeat_time > started_time",
                                 (int(pid),)), 60, what="the heartbeat thread's first beat")

        def idle_then_call(allowed_after: Callable[[int], int]) -> tuple[int, int]:
            """(descriptors after a burst, after an idle spell and one more call), the latter
            polled for up to 30 s until it is down to allowed_after(the former)."""
            burst(session, pid, 12, held=True)
            peak = open_fds(wal, pid)
            time.sleep(ANYIO_IDLE_S + 0.5)  # the idle spell itself: past anyio's limit
            burst(session, pid, 1, held=False)  # retires the idle threads
            deadline = time.monotonic() + 30
            while (rest := open_fds(wal, pid)) > allowed_after(peak) and time.monotonic() < deadline:
                time.sleep(0.1)
            return peak, rest

        first = idle_then_call(lambda peak: peak - 5)
        counts = [first, idle_then_call(lambda _: first[1])]
    (peak1, rest1), (_peak2, rest2) = counts
    assert peak1 >= 12, f"a burst of 12 calls waiting at once left {peak1} connections: the count is wrong"
    assert rest1 <= peak1 - 5 and rest2 <= rest1, f"WAL descriptors (peak, after idle): {counts}"
