"""Test helpers: real config files, the real front in this process or in a subprocess, the
official MCP client, and the worker's stages run in this process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import yaml
from anyio.from_thread import start_blocking_portal
from mcp import Client
from mcp.client.stdio import StdioServerParameters

if sys.version_info < (3, 11):  # a builtin from 3.11; anyio needs the backport before it
    from exceptiongroup import BaseExceptionGroup

BIN = Path(sys.executable).parent


def write_config(folder: Path, **sections) -> Path:
    """Write a config.yaml in folder with data_dir 'data' plus the given sections."""
    # No autostarted worker unless a test asks for one: most tests need none, and a detached
    # worker would outlive the test.
    raw = {"storage": {"data_dir": "data"}, "worker": {"autostart": False}}
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


class McpSession:
    """A synchronous face on the official async MCP client, for plain pytest tests."""

    def __init__(self, portal, client: Client):
        self._portal = portal
        self.client = client

    def call(self, name: str, arguments: dict | None = None):
        return self._portal.call(lambda: self.client.call_tool(name, arguments or {}))

    def ok(self, name: str, arguments: dict | None = None) -> dict:
        """Call a tool that must succeed; return its structured content."""
        result = self.call(name, arguments)
        assert not result.is_error, f"{name} failed: {result.content[0].text}"
        assert result.structured_content is not None, f"{name} sent no structured content"
        return result.structured_content

    def error(self, name: str, arguments: dict | None = None) -> str:
        """Call a tool that must fail with a tool error; return the message."""
        result = self.call(name, arguments)
        assert result.is_error, f"{name} unexpectedly succeeded: {result.structured_content}"
        return result.content[0].text

    def tool_names(self) -> list[str]:
        return [t.name for t in self._portal.call(self.client.list_tools).tools]


@contextmanager
def mcp_session(server):
    """Open the official client against `server` (stdio params, URL, transport or MCPServer)."""
    with start_blocking_portal() as portal:
        client = Client(server) if not isinstance(server, Client) else server
        cm = portal.wrap_async_context_manager(client)
        with cm as entered:
            yield McpSession(portal, entered)


@contextmanager
def front_in_process(config: Path):
    """The MCP front built in this process as aokun-server builds it, spoken to by the
    official client; closed afterwards. For what a tool means (the stdio process is not the
    point): no process start, no worker autostart, no background warm-up."""
    from aokun_server.app import build_front
    from shared.config import load_config

    front = build_front(load_config(config))
    try:
        with mcp_session(front.server) as session:
            yield session
    finally:
        front.close()


@contextmanager
def logging_kept():
    """Whatever an aokun entry point sets up for logging (shared.logs: a handler on the root
    logger, the levels and filters of named loggers, e.g. the hook silencing "aokun") is undone
    when the block ends, as it ends with the process."""
    import logging

    def loggers() -> dict[str, logging.Logger]:
        named = logging.Logger.manager.loggerDict.items()
        return {"": logging.getLogger(), **{n: lg for n, lg in named if isinstance(lg, logging.Logger)}}

    before = {name: (lg.level, list(lg.handlers), list(lg.filters)) for name, lg in loggers().items()}
    try:
        yield
    finally:
        for name, logger in loggers().items():
            level, handlers, filters = before.get(name, (logging.NOTSET, [], []))
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.filters[:] = filters


@contextmanager
def logging_to(stream, level: str):
    """This process logs as an aokun process configured at `level` does (shared.logs), into
    `stream`, until the block ends."""
    from shared.logs import configure_logging

    with logging_kept():
        configure_logging(level, stream=stream)
        yield


class WorkerHere:
    """The worker's own stage runner, built once in this process as aokun-worker builds it
    (no queue consumer, heartbeat or periodic jobs), for a test that runs the stages several
    times: what a worker would do, done when asked."""

    def __init__(self, config: Path):
        from aokun_worker.service import WorkerService
        from shared.assembly import open_services
        from shared.config import load_config

        self.config = config
        self.service = WorkerService(open_services(load_config(config), queued=False))

    def run_every_stage(self, first: int | None = None) -> None:
        """Every stage of each memory waiting, in the order they were stored; or, as a worker
        does with the memory a queue message names, memory `first` then the rest. Then
        nothing is left pending, running or failed."""
        from shared.store.model.stages import STAGES, StageKey

        runner, stages = self.service.runner, self.service.store.stages
        hashes = {r["stage"]: r["content_hash"] for r in stages.of_memory(first)} if first else {}
        for stage in STAGES:
            if stage in hashes:
                runner.run(StageKey(first, stage, hashes[stage]))
            while runner.run_next(stage)[0]:
                pass
        figures = stages.queue_figures(time.time())
        assert (figures["pending"], figures["running"], figures["failed"]) == (0, 0, 0), figures

    def close(self) -> None:
        self.service.services.close()


def run_every_stage(config: Path, first: int | None = None) -> None:
    """WorkerHere.run_every_stage on a worker built for this one run."""
    worker = WorkerHere(config)
    try:
        worker.run_every_stage(first)
    finally:
        worker.close()


def stdio_params(config: Path, env: dict | None = None) -> StdioServerParameters:
    return StdioServerParameters(command=str(BIN / "aokun-server"),
                                 args=["--config", str(config)], env=env)


def aokun_in_process(*args, env: dict | None = None, stdin: str = "",
                     cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The `aokun` command run in this process as its console script runs it (main(argv)),
    with `env` as the whole environment (as subprocess takes it; default this one), `stdin`
    as its input and `cwd` as its folder; its exit code, stdout and stderr as
    subprocess.run(text=True) gives them. For what a command says and does; that it starts
    as a process is for the process-level tests."""
    from aokun_admin.main import main

    argv = [str(a) for a in args]
    with as_a_process(env, stdin, cwd) as (out, err), logging_kept():
        try:
            code = main(argv)
        except SystemExit as exit_:  # as the interpreter ends: a message is printed, exit 1
            code = exit_.code
            if isinstance(code, str):
                print(code, file=err)
                code = 1
    return subprocess.CompletedProcess(argv, code or 0, out.getvalue(), err.getvalue())


def aokun_as_a_host(config: Path, *args, stdin: str = "") -> subprocess.CompletedProcess:
    """`aokun ARGS --config CONFIG` by aokun_in_process, with the environment a host gives it:
    this one without its AOKUN_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOKUN_")}
    return aokun_in_process(*args, "--config", config, stdin=stdin, env=env)


def last_line(result: subprocess.CompletedProcess) -> str:
    """The last line a command printed, once it is seen to have succeeded."""
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip().splitlines()[-1]


@contextmanager
def as_a_process(env: dict | None, stdin: str, cwd: Path | None):
    """Inside the block this process has the environment `env` (when given), reads `stdin`,
    works in `cwd` (when given) and writes to fresh text streams, yielded as (stdout,
    stderr); all put back afterwards."""
    import io

    saved_env, streams, folder = dict(os.environ), (sys.stdin, sys.stdout, sys.stderr), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), out, err
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
        os.chdir(folder)
        os.environ.clear()
        os.environ.update(saved_env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_server(config: Path, port: int, env: dict | None = None):
    """Run `aokun-server --transport http` until the block ends; yield its /mcp URL."""
    proc = subprocess.Popen(
        [str(BIN / "aokun-server"), "--config", str(config), "--transport", "http",
         "--port", str(port)],
        env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: {proc.stderr.read().decode()}") from exc
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def db_rows(config: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Read the main database directly, as an independent check on what tools report.
    No rows while the database does not exist yet (a process is still starting)."""
    import sqlite3

    data_dir = Path(yaml.safe_load(config.read_text())["storage"]["data_dir"])
    if not data_dir.is_absolute():
        data_dir = config.parent / data_dir
    if not (data_dir / "aokun.db").exists():
        return []
    conn = sqlite3.connect(data_dir / "aokun.db", timeout=30)
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):  # the file exists, its schema is being created
            return []
        raise
    finally:
        conn.close()


def as_json(result) -> str:
    return json.dumps(result, ensure_ascii=False)



def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1, what: str = "condition"):
    """Poll predicate until it returns something truthy; return that, or fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def import_killed(config: Path, file: Path, after_memories: int) -> int:
    """`aokun import FILE` as a process, killed -9 once at least `after_memories` memories are
    committed; the memories committed then."""
    import signal

    def count() -> int:
        rows = db_rows(config, "SELECT COUNT(*) FROM documents")
        return rows[0][0] if rows else 0

    proc = subprocess.Popen([sys.executable, "-m", "aokun_admin.main", "import", str(file), "--config", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: count() >= after_memories, timeout=120, interval=0.02, what="the first memories committed")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    return count()


def start_worker(config: Path, env: dict | None = None) -> subprocess.Popen:
    """A real aokun-worker process; its log goes to data_dir/test-worker-<pid>.log."""
    log = open(config.parent / "worker-test.log", "ab")
    try:
        return subprocess.Popen([str(BIN / "aokun-worker"), "--config", str(config)],
                                env={**os.environ, **(env or {})}, stdout=log, stderr=log)
    finally:
        log.close()


def stop(proc: subprocess.Popen, timeout: float = 20.0) -> int:
    """SIGTERM, wait, and SIGKILL if it will not go."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def stage_summary(config: Path) -> dict:
    """{status: count} over every stage row."""
    return dict(db_rows(config, "SELECT status, COUNT(*) FROM memory_stages GROUP BY status"))


def all_processed(config: Path, expected_memories: int) -> bool:
    """Every stage of every memory done, and exactly one document vector per memory."""
    done = db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE status = 'done'")[0][0]
    vecs = db_rows(config, "SELECT COUNT(*) FROM vectors WHERE kind = 'document'")[0][0]
    return done == 3 * expected_memories and vecs == expected_memories


def memory_service(store, text=None, clock=None, queue=None):
    """The real memory service on a store, for tests that write without a front
    (no queue: the stages are left for a reconciler, as after a front crash)."""
    import time as _time

    from shared.config import AppConfig, TextConfig
    from shared.live_config import LiveConfig
    from shared.memories import MemoryService
    from shared.text.segment import Segmenter

    return MemoryService(store, Segmenter(text or TextConfig()), queue, LiveConfig(AppConfig()),
                         clock=clock or _time.time)


def seed_memories(config: Path, persona: str, *texts: str) -> list[int]:
    """The texts memorized in `persona` through the real memory service (no front); their ids."""
    from shared.assembly import open_services
    from shared.config import load_config
    from shared.store.model.documents import MemoryFields

    services = open_services(load_config(config), queued=False)
    try:
        return [services.memories.memorize(text, MemoryFields(persona_id=persona)).id for text in texts]
    finally:
        services.close()


def store_sql(store, sql: str, params: tuple = ()) -> list:
    """Raw SQL on a store's SQLite file, on a connection of its own (autocommit): for what a
    test sets up or checks below the store's interface (a trigger that fails a write, a
    damaged row, the rows a write left). Not inside a write of the same thread: it would wait
    for that write's lock."""
    import sqlite3

    conn = sqlite3.connect(store.location, timeout=30, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def leaves(error: BaseException):
    """The exceptions inside an exception group (the client's task groups wrap its errors)."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error
