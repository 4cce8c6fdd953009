"""The PostgreSQL store's connections across a server restart (shared/store/postgres/connection.py):
a loan made while the server is away is refused in one line, the first one after it is back is
served, and a pool that is only busy is waited for, never refused.

Real servers: one of the test's own to stop and start (tests/servers.py), the shared one for
the busy pool.
"""

from __future__ import annotations

import threading

import psycopg
import pytest

from helpers import free_port, wait_for
from servers import own_postgres, pg_database
from shared.errors import StorageError
from shared.store.postgres.connection import PgDatabase

pytestmark = pytest.mark.slow


def one(db: PgDatabase, write: bool = False) -> int:
    with (db.write() if write else db.snapshot()) as conn:
        return conn.sql("SELECT 1").fetchone()[0]


def test_a_restarted_server_is_used_by_the_first_loan_after_it_is_back(tmp_path):
    with own_postgres(tmp_path / "pg", free_port()) as server:
        # A short busy timeout: a pool still backing off between reconnection attempts when
        # the server is back would time out the first loan instead of serving it.
        db = PgDatabase(server.url, pool_size=4, busy_timeout_ms=1000)
        try:
            # Three connections in the pool, all about to be broken by the restart.
            held = threading.Barrier(3)

            def hold():
                with db.snapshot() as conn:
                    held.wait(timeout=30)
                    conn.sql("SELECT 1")

            threads = [threading.Thread(target=hold) for _ in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

            server.stop("fast")
            # Down for several refusals (the pool's own backoff would have grown meanwhile);
            # each one line, saying the server is not there rather than that time ran out.
            for write in (False, True, False, True, False):
                with pytest.raises(StorageError) as refused:
                    one(db, write)
                message = str(refused.value)
                assert refused.value.kind == "cannot_open"
                assert message.startswith("cannot reach the PostgreSQL database 127.0.0.1:")
                assert "within" not in message and "\n" not in message, message
                assert message.endswith("; nothing was stored") == write, message
            server.start()
            assert one(db, write=True) == 1
            assert one(db) == 1
        finally:
            db.close()


def test_a_busy_pool_is_waited_for_not_refused():
    with pg_database() as url:
        db = PgDatabase(url, pool_size=1, busy_timeout_ms=60_000)
        try:
            name = url.rsplit("/", 1)[1]

            def sessions() -> int:
                with psycopg.connect(url, connect_timeout=5) as conn:
                    return conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s",
                                        (name,)).fetchone()[0]

            served, failed = [], []

            def second():
                try:
                    served.append(one(db))
                except StorageError as exc:
                    failed.append(exc)

            with db.snapshot():  # the pool's one connection, lent out
                baseline = sessions()
                waiter = threading.Thread(target=second)
                waiter.start()
                # The waiting loan asks the server directly after each empty wait (its own
                # connection, and ours counting them): let it do so a few times.
                wait_for(lambda: sessions() >= baseline + 6 or failed, 60,
                         what="the waiting loan asking the server whether it is there")
                assert not failed, failed
            waiter.join(timeout=60)
            assert served == [1] and not failed
        finally:
            db.close()


def test_a_server_out_of_connection_slots_is_waited_for_not_refused(tmp_path):
    with own_postgres(tmp_path / "pg", free_port()) as server:
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("ALTER SYSTEM SET max_connections = 3")
            admin.execute("ALTER SYSTEM SET superuser_reserved_connections = 0")
        server.stop("fast")
        server.start()
        log = server.folder / "pg.log"
        refused_before = log.read_text(errors="replace").count("too many clients")
        db = PgDatabase(server.url, pool_size=1, busy_timeout_ms=60_000)
        others: list[psycopg.Connection] = []
        try:
            served, failed = [], []

            def second():
                try:
                    served.append(one(db))
                except StorageError as exc:
                    failed.append(exc)

            with db.snapshot():  # the pool's one connection; two others take the server's last slots
                others = [psycopg.connect(server.url) for _ in range(2)]
                waiter = threading.Thread(target=second)
                waiter.start()
                # Its direct attempts are turned away for want of a slot (the server logs each).
                wait_for(lambda: log.read_text(errors="replace").count("too many clients") >= refused_before + 2
                         or failed, 60, what="the waiting loan turned away by a full server")
                assert not failed, failed
            waiter.join(timeout=60)
            assert served == [1] and not failed
        finally:
            for other in others:
                other.close()
            db.close()
