"""queue.backend redis: the queue on a real Redis server (team mode).

Each test uses a queue name of its own (its keys are huey.*.<name>) and deletes exactly those
keys at the end: the Redis server may be shared with other tests and other users. Without a
Redis server on 127.0.0.1:6379 the tests needing one are skipped, saying why; with
AOKUN_REQUIRE_SERVERS=1 (CI) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from mcp import Client
from mcp.client.stdio import stdio_client

from fake_openai import FakeEmbeddingsServer
from helpers import (
    all_processed,
    db_rows,
    free_port,
    mcp_session,
    stage_summary,
    start_worker,
    stdio_params,
    stop,
    wait_for,
    write_config,
)
from servers import REDIS_URL, queue_keys, redis_queue_name
from shared.config import ALL_TOOLS, QueueConfig, load_config

BIN = Path(sys.executable).parent


@pytest.fixture
def redis_queue():
    """(client, unique queue name); the name's keys are deleted afterwards, and only those."""
    with redis_queue_name() as found:
        yield found


@pytest.fixture
def fake_api():
    with FakeEmbeddingsServer(dim=64) as server:
        yield server


def redis_config(tmp_path, server: FakeEmbeddingsServer, name: str):
    embedding = {"provider": "openai", "base_url": server.base_url, "model": "fake-embed",
                 "dimensions": server.dim, "api_key": "sk-test", "max_retries": 1}
    queue = {"backend": "redis", "url": REDIS_URL, "name": name, "retry_base_s": 0.2,
             "retry_max_s": 1.0, "max_retries": 1000, "reconcile_interval_s": 2.0, "embed_batch_size": 8}
    return write_config(tmp_path, embedding=embedding, queue=queue,
                        server={"exposed_tools": list(ALL_TOOLS)})


def aokun(config: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "aokun"), "--config", str(config), *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_worker_on_redis_processes_everything_and_the_reconciler_refills_a_lost_queue(
        tmp_path, fake_api, redis_queue):
    client, name = redis_queue
    config = redis_config(tmp_path, fake_api, name)
    queue_key = f"huey.redis.{name}"
    worker = start_worker(config)
    try:
        with mcp_session(stdio_params(config)) as s:
            for i in range(6):
                s.ok("memorize", {"content": f"first batch {i}: a note about topic {i} on Redis"})
            wait_for(lambda: all_processed(config, 6), 90, what="six memories processed over Redis")
            # The queue is in Redis: no queue file was made in data_dir.
            assert not (tmp_path / "data" / "queue.db").exists()
            assert stop(worker) == 0
            # With no worker, what the front writes waits in Redis...
            for i in range(6, 20):
                s.ok("memorize", {"content": f"second batch {i}: a note about item {i} while down"})
        assert client.llen(queue_key) > 0
        # ...and Redis loses every key of this queue (a restart without persistence, a flush).
        deleted = client.delete(*queue_keys(client, name))
        assert deleted >= 1 and client.llen(queue_key) == 0
        assert stage_summary(config).get("done", 0) == 18  # the first six's three stages each
        # The worker's reconciler finds the queue empty and queues every pending stage again.
        worker = start_worker(config)
        wait_for(lambda: all_processed(config, 20), 90, what="all 20 memories processed after the loss")
        # Lost again while the worker runs: embedding fails for now, so the embed stages wait
        # on retries scheduled in Redis; those are deleted, and only the periodic reconciler
        # can bring the work back.
        fake_api.fail_next = 10**6
        with mcp_session(stdio_params(config)) as s:
            for i in range(20, 26):
                s.ok("memorize", {"content": f"third batch {i}: a note about thing {i} mid-run"})
        # Each of the six has failed twice and is not done: each is between retries, its next
        # one scheduled in Redis or running (then it schedules the next). Attempts only grow,
        # so this holds from some moment on, unlike "all six pending at one instant".
        wait_for(lambda: db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE stage = 'embed' "
                                         "AND status IN ('pending', 'running') AND attempts >= 2")[0][0] == 6,
                 60, what="six embed stages retrying")
        client.delete(*queue_keys(client, name))
        fake_api.fail_next = 0
        wait_for(lambda: all_processed(config, 26), 120, what="all 26 memories processed")
    finally:
        stop(worker)
    assert stage_summary(config) == {"done": 78}
    assert not queue_keys(client, name) or client.llen(queue_key) == 0
    per_memory = db_rows(config, "SELECT memory_id, COUNT(*) FROM vectors WHERE kind = 'document' "
                                 "GROUP BY memory_id")
    assert len(per_memory) == 26 and {count for _, count in per_memory} == {1}
    log = (tmp_path / "worker-test.log").read_text(encoding="utf-8", errors="replace")
    assert f"redis {REDIS_URL} (queue name {name})" in log


@contextmanager
def own_redis_server(folder: Path, port: int):
    """A redis-server of this test's own on `port`, keeping nothing on disk; stopped at the end."""
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import redis

        client = redis.Redis(port=port, socket_connect_timeout=1)

        def answers():
            try:
                return client.ping()
            except redis.RedisError:
                return False

        wait_for(answers, 20, what=f"redis-server on port {port}")
        client.close()
        yield proc
    finally:
        stop(proc)


def need_redis_server() -> None:
    """Skip (or, with AOKUN_REQUIRE_SERVERS=1, fail) without a redis-server program."""
    if shutil.which("redis-server") is None:
        why = "no redis-server program to start a Redis of this test's own"
        if os.environ.get("AOKUN_REQUIRE_SERVERS") == "1":
            pytest.fail(f"{why}; AOKUN_REQUIRE_SERVERS=1 requires one")
        pytest.skip(why)


@pytest.mark.slow
def test_worker_rides_out_a_redis_restart_that_loses_everything(tmp_path, fake_api):
    need_redis_server()
    port = free_port()
    config = redis_config(tmp_path, fake_api, "aokun_restart")
    text = config.read_text().replace(REDIS_URL, f"redis://127.0.0.1:{port}/0")
    config.write_text(text)
    worker = None
    try:
        with own_redis_server(tmp_path, port):
            worker = start_worker(config)
            with mcp_session(stdio_params(config)) as s:
                for i in range(4):
                    s.ok("memorize", {"content": f"before the outage {i}: topic {i}"})
                wait_for(lambda: all_processed(config, 4), 90, what="four memories processed")
        # Redis is gone: the front still takes memories (the stage rows keep the work)...
        with mcp_session(stdio_params(config)) as s:
            for i in range(4, 10):
                s.ok("memorize", {"content": f"during the outage {i}: item {i}"})
        log_path = tmp_path / "worker-test.log"
        wait_for(lambda: "is unreachable" in log_path.read_text(errors="replace"), 30,
                 what="the worker's warning about Redis")
        assert worker.poll() is None
        # ...and a Redis that comes back empty gets the work from the worker's reconciler.
        with own_redis_server(tmp_path, port):
            wait_for(lambda: all_processed(config, 10), 90, what="all ten memories processed")
            assert stop(worker) == 0
    finally:
        if worker is not None:
            stop(worker)
    assert stage_summary(config) == {"done": 30}
    log = (tmp_path / "worker-test.log").read_text(errors="replace")
    # One warning line a minute while it is away, not a traceback per poll and thread.
    assert "Error reading from queue" not in log and "Traceback" not in log, log[-3000:]
    assert log.count("is unreachable") <= 3, log[-3000:]


def lines_with(path: Path, text: str) -> list[str]:
    return [line for line in path.read_text(errors="replace").splitlines() if text in line]


@pytest.mark.slow
def test_a_redis_outage_is_one_warning_a_minute_per_cause_and_never_a_traceback(tmp_path, fake_api):
    """Redis paused (every command times out), then stopped (every connection refused), while
    a front takes memories and a worker polls with retries scheduled: each process says so
    once per cause, the worker once when it answers again, and everything is processed after."""
    need_redis_server()
    port = free_port()
    config = redis_config(tmp_path, fake_api, "aokun_outage")
    # Commands time out after 3 s instead of 15 (a URL option wins over the client's default).
    url = f"redis://127.0.0.1:{port}/0?socket_timeout=3"
    config.write_text(config.read_text().replace(REDIS_URL, url))
    front_log, worker_log = tmp_path / "front.log", tmp_path / "worker-test.log"
    worker, written = None, 0
    try:
        with own_redis_server(tmp_path, port) as redis_server, open(front_log, "w") as errlog, \
                mcp_session(Client(stdio_client(stdio_params(config), errlog=errlog))) as s:

            def memorize(what: str) -> None:
                nonlocal written
                s.ok("memorize", {"content": f"{what} {written}: a note about topic {written}"})
                written += 1

            worker = start_worker(config)
            for _ in range(3):
                memorize("before")
            wait_for(lambda: all_processed(config, 3), 90, what="three memories processed")
            # Embedding fails from now on: the worker keeps retries in Redis's schedule, which
            # its consumer reads every second.
            fake_api.fail_next = 10**6
            memorize("failing")
            client = redis.Redis(port=port)
            wait_for(lambda: client.zcard("huey.schedule.aokun_outage"), 60, what="a retry scheduled")
            client.close()
            redis_server.send_signal(signal.SIGSTOP)
            try:
                memorize("paused")  # the queueing times out: the memory is kept all the same
                wait_for(lambda: lines_with(worker_log, "Timeout reading"), 30,
                         what="the worker's reads timing out")
                memorize("paused")
            finally:
                redis_server.send_signal(signal.SIGCONT)
        # Redis is stopped now; the front goes on taking memories.
        with open(front_log, "a") as errlog, \
                mcp_session(Client(stdio_client(stdio_params(config), errlog=errlog))) as s:
            for _ in range(60):
                memorize("stopped")
            wait_for(lambda: lines_with(worker_log, "Connection refused"), 30,
                     what="the worker finding Redis stopped")
        fake_api.fail_next = 0
        with own_redis_server(tmp_path, port):
            wait_for(lambda: all_processed(config, written), 120, what=f"all {written} memories processed")
            wait_for(lambda: lines_with(worker_log, "answers again"), 30, what="the worker saying Redis is back")
            assert stop(worker) == 0
    finally:
        if worker is not None:
            stop(worker)
    # The front: one line per cause (timed out; connection closed, refused), not one per memory.
    refusals = lines_with(front_log, "could not queue")
    assert 1 <= len(refusals) <= 3 and written - 3 > 3 * len(refusals), refusals
    worker_text = worker_log.read_text(errors="replace")
    assert "Traceback" not in worker_text and "Error reading" not in worker_text, worker_text[-3000:]
    assert 1 <= len(lines_with(worker_log, "is unreachable")) <= 3, worker_text[-3000:]
    assert len(lines_with(worker_log, "cannot queue")) <= 3, worker_text[-3000:]
    assert "Traceback" not in front_log.read_text(errors="replace")


def test_redis_backend_without_url_is_refused_in_one_line(tmp_path):
    config = write_config(tmp_path, queue={"backend": "redis"})
    for command in ([str(BIN / "aokun-worker"), "--config", str(config)],
                    [str(BIN / "aokun"), "--config", str(config), "doctor"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "queue.backend redis needs queue.url" in lines[0], done.stderr


def test_unreachable_redis_is_one_line_naming_the_url(tmp_path):
    port = free_port()  # nothing listens there
    url = f"redis://:s3cret@127.0.0.1:{port}/0"
    config = write_config(tmp_path, queue={"backend": "redis", "url": url})
    done = subprocess.run([str(BIN / "aokun-worker"), "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"queue Redis at redis://:***@127.0.0.1:{port}/0 is unreachable" in lines[0]
    assert "s3cret" not in done.stderr
    doctor = aokun(config, "doctor")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert f"queue engine: redis redis://:***@127.0.0.1:{port}/0 (queue name aokun), unreachable" \
        in doctor.stdout
    assert "PROBLEM: queue Redis at" in doctor.stdout and "s3cret" not in doctor.stdout


def test_doctor_shows_the_queue_engine(tmp_path, redis_queue):
    _, name = redis_queue
    sqlite_dir = tmp_path / "sqlite"
    sqlite_dir.mkdir()
    doctor = aokun(write_config(sqlite_dir), "doctor")
    assert f"queue engine: sqlite {sqlite_dir / 'data' / 'queue.db'}" in doctor.stdout, doctor.stdout
    redis_dir = tmp_path / "redis"
    redis_dir.mkdir()
    config = write_config(redis_dir, queue={"backend": "redis", "url": REDIS_URL, "name": name})
    doctor = aokun(config, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert (f"queue engine: redis {REDIS_URL} (queue name {name}), reachable (PING answered)"
            in doctor.stdout)


def test_password_from_the_environment_unless_the_url_has_one():
    from shared.queue import _redis_client

    queue = QueueConfig(backend="redis", url="redis://127.0.0.1:6379/0")
    client = _redis_client(queue, env={"AOKUN_QUEUE_PASSWORD": "from-env"})
    assert client.connection_pool.connection_kwargs["password"] == "from-env"
    queue = QueueConfig(backend="redis", url="redis://:in-url@127.0.0.1:6379/0")
    client = _redis_client(queue, env={"AOKUN_QUEUE_PASSWORD": "from-env"})
    assert client.connection_pool.connection_kwargs["password"] == "in-url"
    queue = QueueConfig(backend="redis", url="redis://127.0.0.1:6379/0", password_env="")
    client = _redis_client(queue, env={"AOKUN_QUEUE_PASSWORD": "from-env"})
    assert client.connection_pool.connection_kwargs.get("password") is None


def test_config_loads_redis_keys(tmp_path):
    config = load_config(write_config(tmp_path, queue={"backend": "redis", "url": REDIS_URL,
                                                        "name": "team_a"}), env={})
    assert (config.queue.backend, config.queue.url, config.queue.name) == ("redis", REDIS_URL, "team_a")
