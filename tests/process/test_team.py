"""Team mode: fronts and workers on several hosts, one PostgreSQL store, one Redis
queue. Hosts are simulated as separate process groups with folders (data_dirs) of their own,
on different loopback addresses; nothing is shared but the two servers.

Each test uses a database and a queue name of its own (tests/servers.py) and a fake
OpenAI-compatible embedding server, so that vectors are made quickly by real workers.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from mcp.shared.exceptions import MCPError

from fake_openai import FakeEmbeddingsServer
from helpers import free_port, mcp_session, start_worker, stop, wait_for, write_config
from servers import REDIS_URL, own_postgres, pg_store_database, queue_keys, redis_queue_name
from shared.config import ALL_TOOLS

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


@pytest.fixture
def fake_api():
    with FakeEmbeddingsServer(dim=64) as server:
        yield server


def host_config(folder: Path, url: str, queue_name: str, api: FakeEmbeddingsServer, address: str) -> Path:
    """One host's config: the shared store and queue, a data_dir of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_config(
        folder,
        storage={"backend": "postgresql", "url": url, "data_dir": "data", "busy_timeout_ms": 10_000},
        queue={"backend": "redis", "url": REDIS_URL, "name": queue_name, "retry_base_s": 0.2,
               "retry_max_s": 1.0, "max_retries": 1000, "reconcile_interval_s": 2.0},
        embedding={"provider": "openai", "base_url": api.base_url, "model": "fake-embed",
                   "dimensions": api.dim, "api_key": "sk-test", "max_retries": 1},
        server={"exposed_tools": list(ALL_TOOLS), "host": address})


@contextmanager
def http_front(config: Path, address: str, port: int):
    """`aokun-server --transport http` on address:port until the block ends; its /mcp URL."""
    log = open(config.parent / "front.log", "ab")
    proc = subprocess.Popen([str(BIN / "aokun-server"), "--config", str(config), "--transport", "http",
                             "--port", str(port)], stdout=log, stderr=log)
    log.close()
    try:
        def answers():
            if proc.poll() is not None:
                raise AssertionError(f"the front on {address}:{port} exited: "
                                     f"{(config.parent / 'front.log').read_text(errors='replace')[-2000:]}")
            try:
                socket.create_connection((address, port), timeout=0.2).close()
                return True
            except OSError:
                return False

        wait_for(answers, 60, what=f"the front on {address}:{port}")
        yield f"http://{address}:{port}/mcp"
    finally:
        stop(proc)


def pg_rows(url: str, sql: str, params: tuple = ()) -> list[tuple]:
    """The store's tables read directly, as an independent check on what tools report."""
    with psycopg.connect(url, connect_timeout=5) as conn:
        return conn.execute(sql, params).fetchall()


def processed(url: str, memories: int) -> bool:
    """Every stage of every memory done, exactly one document vector per memory."""
    done = pg_rows(url, "SELECT COUNT(*) FROM memory_stages WHERE status = 'done'")[0][0]
    vectors = pg_rows(url, "SELECT COUNT(*) FROM vectors WHERE kind = 'document'")[0][0]
    return done == 3 * memories and vectors == memories


def recalled_ids(session, query: str, persona: str) -> list[int]:
    found = session.ok("recall", {"query": query, "persona_id": persona})
    return [m["id"] for m in found["results"]]


def test_two_fronts_and_two_workers_on_two_hosts_share_one_store_and_queue(tmp_path, fake_api):
    with pg_store_database() as url, redis_queue_name() as (client, queue_name):
        a = host_config(tmp_path / "host-a", url, queue_name, fake_api, "127.0.0.1")
        b = host_config(tmp_path / "host-b", url, queue_name, fake_api, "127.0.0.2")
        worker_b = start_worker(b)
        worker_a = None
        try:
            with http_front(a, "127.0.0.1", free_port()) as url_a, \
                    http_front(b, "127.0.0.2", free_port()) as url_b, \
                    mcp_session(url_a) as front_a, mcp_session(url_b) as front_b:
                # Written through host A's front, embedded by host B's worker (the only one).
                kayak = front_a.ok("memorize", {"content": "Ada paddles her red kayak on Lake Biel",
                                                "metadata": {"persona_id": "team"}})["id"]
                wait_for(lambda: processed(url, 1), 60, what="the memory processed on host B")
                # Recalled through host B's front, and through A's: its vector index caught up
                # with the change sequence.
                assert recalled_ids(front_b, "Ada's kayak", "team")[0] == kayak
                assert recalled_ids(front_a, "Ada's kayak", "team")[0] == kayak

                # Both workers now; memories written through both fronts.
                worker_a = start_worker(a)
                # Both beating before work is handed out (a worker stopped while it is still
                # starting has no SIGTERM handler yet).
                wait_for(lambda: pg_rows(url, "SELECT COUNT(*) FROM workers")[0][0] == 2, 60,
                         what="both hosts' workers beating")
                written = [kayak]
                for i in range(12):
                    front = front_a if i % 2 else front_b
                    written.append(front.ok("memorize", {"content": f"team note {i}: the build of module {i} "
                                                                    f"passed on runner {i % 3}",
                                                         "metadata": {"persona_id": "team"}})["id"])
                wait_for(lambda: processed(url, 13), 90, what="13 memories processed by two workers")
                for i in (3, 8):
                    other = front_b if i % 2 else front_a
                    assert written[i + 1] in recalled_ids(other, f"module {i} build", "team")

                # Redis loses the queue with the workers stopped: the reconciler puts the work back.
                assert stop(worker_a) == 0 and stop(worker_b) == 0
                for i in range(5):
                    written.append(front_a.ok("memorize", {"content": f"while no worker runs {i}",
                                                           "metadata": {"persona_id": "team"}})["id"])
                client.delete(*queue_keys(client, queue_name))
                worker_a, worker_b = start_worker(a), start_worker(b)
                wait_for(lambda: processed(url, 18), 90, what="the memories written while no worker ran")
        finally:
            for worker in (worker_a, worker_b):
                if worker is not None:
                    stop(worker)

        per_memory = pg_rows(url, "SELECT memory_id, COUNT(*) FROM vectors WHERE kind = 'document'"
                                  " GROUP BY memory_id")
        assert sorted(m for m, _ in per_memory) == sorted(written)
        assert {count for _, count in per_memory} == {1}
        assert pg_rows(url, "SELECT COUNT(*) FROM documents")[0][0] == 18
        # Each host kept only its own caches; nothing of the store is in a data_dir.
        for host in (a, b):
            assert not (host.parent / "data" / "aokun.db").exists()
            assert not (host.parent / "data" / "queue.db").exists()
        # doctor on either host: one store, consistent.
        for host in (a, b):
            doctor = subprocess.run([str(BIN / "aokun"), "--config", str(host), "doctor"],
                                    capture_output=True, text=True, timeout=120)
            assert doctor.returncode == 0, doctor.stdout + doctor.stderr
            assert "store engine: postgresql" in doctor.stdout and "consistent" in doctor.stdout
        for host in (a, b):
            log = (host.parent / "worker-test.log").read_text(errors="replace")
            assert "Traceback" not in log, log[-3000:]


def test_a_postgresql_restart_loses_no_acknowledged_memory(tmp_path, fake_api):
    with redis_queue_name() as (_, queue_name), own_postgres(tmp_path / "pg", free_port()) as server:
        url = server.url
        config = host_config(tmp_path / "host", url, queue_name, fake_api, "127.0.0.1")
        worker = start_worker(config)
        acknowledged = []
        try:
            with http_front(config, "127.0.0.1", free_port()) as front_url, mcp_session(front_url) as front:
                for i in range(4):
                    acknowledged.append(front.ok("memorize", {"content": f"before the restart {i}"})["id"])
                wait_for(lambda: processed(url, 4), 60, what="four memories processed")
                server.stop("fast")
                # stop raises if pg_ctl fails; that the server is gone is checked as well.
                assert not listening(server.port), "the test's PostgreSQL server still listens after pg_ctl stop"
                # While the database is down a memorize is refused, never acknowledged: the
                # front cannot check the token and answers 503 in one line, which the client
                # raises.
                for i in range(2):
                    with pytest.raises(MCPError, match=r"^the token could not be checked: cannot reach the "
                                                       "PostgreSQL database [^\n]*$"):
                        front.call("memorize", {"content": f"while the database is down {i}"})
                server.start()  # returns once the server accepts connections (pg_ctl -w)
                # The pool replaces its dead connections on the next loan, however long the
                # database was away: the first write after it is back is acknowledged.
                for i in range(4):
                    acknowledged.append(front.ok("memorize", {"content": f"after the restart {i}"})["id"])
                wait_for(lambda: processed(url, 8), 90, what="all acknowledged memories processed")
            assert worker.poll() is None, "the worker died with the database"
        finally:
            stop(worker)
        front_log = (config.parent / "front.log").read_text(errors="replace")
        assert "could not check a request's token: cannot reach the PostgreSQL database" in front_log
        assert "Traceback" not in front_log, front_log[-3000:]
        stored = [r[0] for r in pg_rows(url, "SELECT id FROM documents ORDER BY id")]
        assert stored == sorted(acknowledged)
        log = (config.parent / "worker-test.log").read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def test_a_front_started_while_the_database_is_away_waits_for_it(tmp_path, fake_api):
    with redis_queue_name() as (_, queue_name), own_postgres(tmp_path / "pg", free_port()) as server:
        config = host_config(tmp_path / "host", server.url, queue_name, fake_api, "127.0.0.1")
        server.stop("fast")
        port, log_path = free_port(), config.parent / "front.log"
        with log_path.open("ab") as log:
            front = subprocess.Popen([str(BIN / "aokun-server"), "--config", str(config), "--transport",
                                      "http", "--port", str(port)], stdout=log, stderr=log)
        try:
            wait_for(lambda: "trying again for up to" in log_path.read_text(errors="replace"), 60,
                     what="the front saying it waits for the database")
            assert front.poll() is None, "the front gave up on a database that is only restarting"
            server.start()
            wait_for(lambda: listening(port) or front.poll() is not None, 60, what="the front listening")
            assert front.poll() is None, log_path.read_text(errors="replace")[-2000:]
            with mcp_session(f"http://127.0.0.1:{port}/mcp") as session:
                assert session.ok("memorize", {"content": "stored once the database was back"})["id"] == 1
        finally:
            stop(front)
