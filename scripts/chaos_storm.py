"""The storm of a chaos run (scripts/chaos.py, and its team deployment in chaos_team.py): the
fronts and workers as processes that can be killed and started again, client threads calling
memorize and recall with the official MCP client, what they say, the tally of what was
acknowledged, and the storm itself (calls while a kill loop SIGKILLs a random process)."""

from __future__ import annotations

import collections
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
from mcp import Client

if sys.version_info < (3, 11):  # a builtin from 3.11; anyio needs the backport before it
    from exceptiongroup import BaseExceptionGroup
BIN = Path(sys.executable).parent
CALL_TIMEOUT_S = 20.0      # one tool call (or opening a session) longer than this counts as failed
START_TIMEOUT_S = 90.0     # a front must listen within this after spawn


# --- processes ---------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """One aokun-server (HTTP, loopback) or aokun-worker process slot: start, kill -9, stop."""

    def __init__(self, kind: str, config: Path, log_path: Path, port: int | None = None,
                 host: str = "127.0.0.1", label: str = ""):
        self.kind, self.config, self.log_path, self.port, self.host = kind, config, log_path, port, host
        self.label = label  # a name for the messages instead of kind:port
        self.proc: subprocess.Popen | None = None

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        return f"{self.kind}:{self.port}" if self.port else self.kind

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    def start(self) -> None:
        if self.kind == "front":
            argv = [str(BIN / "aokun-server"), "--config", str(self.config), "--transport", "http",
                    "--host", self.host, "--port", str(self.port)]
        else:
            argv = [str(BIN / "aokun-worker"), "--config", str(self.config)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                         env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})

    def kill(self) -> None:
        """SIGKILL, as a crash would, and reap the process."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (graceful), then SIGKILL if it will not go."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def wait_listening(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((self.host, self.port), timeout=0.2).close()
                return
            except OSError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} did not start listening; see {self.log_path}") from exc
                time.sleep(0.1)


# --- clients -----------------------------------------------------------------------------------

def error_key(error: BaseException | str) -> str:
    """One short line per kind of failure, numbers masked, so failures group by message."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {error}".rstrip(": ")
    else:
        text = error
    text = re.sub(r"\d+", "#", text.strip().splitlines()[0] if text.strip() else "(empty)")
    return text[:140]


class ClientLoop:
    """One client thread with its own event loop and MCP session over streamable HTTP.

    next_call() gives (tool, arguments); on_result(tool, arguments, result, ms) gets each
    answer (a tool error included) and on_failure(tool, arguments, message, ms) each call that
    got no answer (tool None: a session that would not open). After a failure the client moves
    to the next URL, so a killed front costs the calls in flight and nothing more."""

    def __init__(self, urls: list[str], first: int, stop: threading.Event,
                 next_call: Callable[[], tuple[str, dict]], on_result: Callable,
                 on_failure: Callable, timeout: float = CALL_TIMEOUT_S):
        self.urls, self.front, self.stop = urls, first, stop
        self.next_call, self.on_result, self.on_failure = next_call, on_result, on_failure
        self.timeout = timeout
        self.thread = threading.Thread(target=anyio.run, args=(self._run,), daemon=True)

    async def _run(self) -> None:
        while not self.stop.is_set():
            if not await self._session(self.urls[self.front % len(self.urls)]):
                self.front += 1
                await anyio.sleep(0.2)

    async def _session(self, url: str) -> bool:
        """Call tools over one session until stop (True) or a failure (False)."""
        pending: tuple[str, dict, float] | None = None
        opened = time.perf_counter()
        with anyio.CancelScope() as scope:
            scope.deadline = anyio.current_time() + self.timeout
            try:
                async with Client(url, read_timeout_seconds=self.timeout) as client:
                    while not self.stop.is_set():
                        tool, arguments = self.next_call()
                        started = time.perf_counter()
                        pending = (tool, arguments, started)
                        scope.deadline = anyio.current_time() + self.timeout
                        result = await client.call_tool(tool, arguments)
                        pending = None
                        self.on_result(tool, arguments, result, _ms_since(started))
            except Exception as exc:  # every failure is counted by its message
                self._failed(pending, opened, error_key(exc))
                return False
        if scope.cancelled_caught:
            self._failed(pending, opened, f"no answer within {self.timeout:.0f} s")
            return False
        return True

    def _failed(self, pending, opened: float, message: str) -> None:
        if pending is None:
            self.on_failure(None, {}, message, _ms_since(opened))
        else:
            tool, arguments, started = pending
            self.on_failure(tool, arguments, message, _ms_since(started))


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


# --- what the clients say ----------------------------------------------------------------------

PEOPLE = ["Alice", "Bob", "Carol", "Dmitri", "Hannah", "Kenji", "王芳", "李雷"]
PLACES = ["the garden", "Hangzhou", "the office", "West Lake", "the climbing gym", "the library"]
DOINGS = ["planted tomatoes", "reviewed the project plan", "ran ten kilometres", "adopted a cat",
          "learned to bake bread", "argued about the budget", "fixed the old bicycle"]
WHEN = ["yesterday", "last Tuesday", "tomorrow", "next Friday", "in two weeks", "this morning"]
CHINESE = ["{p}明天要去{place}体检", "{p}说自己对花生过敏", "{p}下周三和同事在{place}开会",
           "{p}最喜欢的饮料是乌龙茶", "{p}上个月在{place}跑了半程马拉松"]


class Speech:
    """Unique memorize texts (tagged with the run, the client and a sequence number) and
    recall questions, drawn from one client's own random generator."""

    def __init__(self, run: str, client: int, rng: random.Random, recall_share: float):
        self.run, self.client, self.rng, self.recall_share = run, client, rng, recall_share
        self.seq = 0

    def next_call(self) -> tuple[str, dict]:
        r, person, place = self.rng, self.rng.choice(PEOPLE), self.rng.choice(PLACES)
        if r.random() < self.recall_share:
            return "recall", {"query": f"What did {person} do at {place}?", "k": 5}
        self.seq += 1
        if r.random() < 0.3:
            sentence = r.choice(CHINESE).format(p=person, place=place)
        else:
            sentence = f"{person} {r.choice(DOINGS)} at {place} {r.choice(WHEN)} with {r.choice(PEOPLE)}."
        metadata: dict = {"persona_id": f"p{self.client % 3}", "importance": round(r.random(), 2)}
        if r.random() < 0.5:
            metadata["participants"] = [person]
        if r.random() < 0.3:
            metadata["key_facts"] = [sentence]
        return "memorize", {"content": f"{sentence} [{self.run} c{self.client} #{self.seq}]",
                            "metadata": metadata}


class Tally:
    """What the clients saw, shared by their threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked: dict[int, str] = {}          # memorize id -> the text it returned
        self.answered: collections.Counter = collections.Counter()   # tool -> answers
        self.failed: collections.Counter = collections.Counter()     # "tool: message" -> calls
        self.open_failed: collections.Counter = collections.Counter()  # message -> sessions
        self.reused_ids: list[int] = []
        self.restarts: list[float] = []          # seconds from a front's restart to listening

    def on_result(self, tool: str, arguments: dict, result, ms: float) -> None:
        with self.lock:
            if result.is_error:
                self.failed[f"{tool}: {error_key(result.content[0].text)}"] += 1
                return
            self.answered[tool] += 1
            if tool == "memorize":
                memory = result.structured_content
                if memory["id"] in self.acked:
                    self.reused_ids.append(memory["id"])
                self.acked[memory["id"]] = memory["text"]

    def on_failure(self, tool: str | None, arguments: dict, message: str, ms: float) -> None:
        with self.lock:
            if tool is None:
                self.open_failed[message] += 1
            else:
                self.failed[f"{tool}: {message}"] += 1


# --- the run -----------------------------------------------------------------------------------

def kill_loop(services: list[Service], stop: threading.Event, every: float, rng: random.Random,
              kills: collections.Counter, tally: Tally, started: float,
              gate: threading.Lock | None = None) -> None:
    """Every `every` seconds (±50 %), SIGKILL a random front or worker and start it again
    (holding `gate`, if given: whoever else holds it has the processes to itself)."""
    gate = gate or threading.Lock()
    while not stop.wait(rng.uniform(0.5, 1.5) * every):
        victim = rng.choice(services)
        with gate:
            if stop.is_set():
                break
            victim.kill()
            victim.start()
        kills[victim.kind] += 1
        if victim.kind == "front":
            threading.Thread(target=time_restart, args=(victim, tally), daemon=True).start()
        with tally.lock:
            acked, failed = len(tally.acked), sum(tally.failed.values())
        print(f"  {time.monotonic() - started:5.1f} s  kill -9 {victim.name:<11} "
              f"(acknowledged {acked}, failed {failed})", flush=True)


def time_restart(front: Service, tally: Tally) -> None:
    """Record how long a restarted front took to listen (unless it was killed first)."""
    started, proc = time.monotonic(), front.proc
    try:
        front.wait_listening()
    except RuntimeError:
        return
    if front.proc is proc:
        with tally.lock:
            tally.restarts.append(time.monotonic() - started)


class Cluster:
    """The two fronts and two workers of a run, sharing one config and data_dir."""

    def __init__(self, config: Path, logs: Path):
        self.fronts = [Service("front", config, logs / f"front-{i}.log", free_port()) for i in range(2)]
        self.workers = [Service("worker", config, logs / f"worker-{i}.log") for i in range(2)]
        self.services = self.fronts + self.workers

    def start(self) -> None:
        self.fronts[0].start()  # the first front creates the schema alone
        self.fronts[0].wait_listening()
        for service in self.services[1:]:
            service.start()
        self.fronts[1].wait_listening()

    def stop(self) -> None:
        for service in self.services:
            service.stop()

    def kill(self) -> None:
        for service in self.services:
            service.kill()


def storm(args, cluster: Cluster, run: str, tally: Tally, kills: collections.Counter,
          disturb: Callable[[threading.Event, float, threading.Lock], None] | None = None) -> int:
    """Clients call and processes die for args.duration seconds; return how many client
    threads were still inside a call after the stop (their timeout did not hold).
    disturb(stop, started, gate), if given, runs in a thread of its own alongside the kills;
    no process is killed while it holds gate."""
    rng, stop = random.Random(args.seed), threading.Event()
    urls = [f.url for f in cluster.fronts]
    clients = [ClientLoop(urls, i, stop, Speech(run, i, random.Random(rng.random()), args.recall_share).next_call,
                          tally.on_result, tally.on_failure) for i in range(args.clients)]
    started = time.monotonic()
    for client in clients:
        client.thread.start()
    gate = threading.Lock()
    killer = threading.Thread(target=kill_loop, daemon=True,
                              args=(cluster.services, stop, args.kill_every, rng, kills, tally, started, gate))
    killer.start()
    disturber = threading.Thread(target=disturb, args=(stop, started, gate), daemon=True) if disturb else None
    if disturber is not None:
        disturber.start()
    try:
        stop.wait(args.duration)
    finally:
        stop.set()
    killer.join()
    if disturber is not None:
        disturber.join()
    for client in clients:
        client.thread.join(timeout=CALL_TIMEOUT_S + 10)
    return sum(c.thread.is_alive() for c in clients)
