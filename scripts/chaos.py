#!/usr/bin/env python3
"""Chaos run: kill -9 fronts and workers at random under concurrent memorize, then prove that
nothing acknowledged was lost.

Two aokun-server fronts (streamable HTTP on two free loopback ports) and two aokun-worker
processes share one data_dir. N client threads, each with the official MCP client, call
memorize with unique texts (and recall now and then); a client whose front dies counts the call
as failed (not acknowledged) and reconnects to the other front. Every few seconds a random front
or worker is killed with SIGKILL and restarted at once. After --duration seconds the clients
stop, every process is stopped, one worker is started clean, and once every stage row has
ended (bounded wait) the store is checked:

- every acknowledged memorize id is present with exactly the text memorize returned;
- exactly one document vector per memory; no text stored twice;
- every stage row done (none pending, running or failed);
- `aokun doctor` exits 0; PRAGMA integrity_check is ok for every database file.

Figures are printed; the exit status is 1 if any check fails (the work folder is then kept).
Everything talks to 127.0.0.1 only and stops by itself.

With --team (scripts/chaos_team.py) the same storm runs on a team deployment: two hosts (own
folders and configs, fronts on 127.0.0.1 and 127.0.0.2, a worker each) sharing a PostgreSQL
server of the run's own and the local Redis; PostgreSQL is restarted once and the run's Redis
queue flushed once during the storm, and the checks read PostgreSQL.

    .venv/bin/python scripts/chaos.py [--duration 60] [--clients 6] [--kill-every 4]
                                      [--data-dir DIR] [--seed N] [--keep]
    .venv/bin/python scripts/chaos.py --team [--duration 60] [--clients 4] [--kill-every 4]
                                      [--seed N] [--keep]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import anyio
import yaml
from mcp import Client

if sys.version_info < (3, 11):  # a builtin from 3.11; anyio needs the backport before it
    from exceptiongroup import BaseExceptionGroup

BIN = Path(sys.executable).parent
CALL_TIMEOUT_S = 20.0      # one tool call (or opening a session) longer than this counts as failed
START_TIMEOUT_S = 90.0     # a front must listen within this after spawn
DOCTOR_TIMEOUT_S = 180.0


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

def write_config(path: Path, data_dir: Path) -> Path:
    """A small config: no autostart, a fast heartbeat, short leases and retries so that work
    abandoned by a killed worker is taken over within the run."""
    raw = {"storage": {"data_dir": str(data_dir)},
           "worker": {"autostart": False, "heartbeat_interval_s": 1.0},
           "queue": {"lease_s": 30, "reconcile_interval_s": 10, "retry_base_s": 1, "retry_max_s": 10}}
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


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


def stage_counts(db_path: Path) -> dict[str, int]:
    with _connect(db_path) as conn:
        return dict(conn.execute("SELECT status, COUNT(*) FROM memory_stages GROUP BY status"))


def drain(db_path: Path, timeout: float) -> float | None:
    """Seconds until no stage row is pending or running, or None after `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        counts = stage_counts(db_path)
        if not counts.get("pending") and not counts.get("running"):
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def _connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db_path, timeout=30)
    conn.isolation_level = None
    return conn


def run_doctor(config: Path) -> tuple[int, str]:
    try:
        done = subprocess.run([str(BIN / "aokun"), "doctor", "--config", str(config)],
                              capture_output=True, text=True, timeout=DOCTOR_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return -1, f"aokun doctor gave no answer within {DOCTOR_TIMEOUT_S:.0f} s"
    return done.returncode, (done.stdout + done.stderr).strip()


def integrity(data_dir: Path) -> dict[str, str]:
    found = {}
    for path in sorted(data_dir.glob("*.db")):
        with _connect(path) as conn:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        found[path.name] = "ok" if rows == [("ok",)] else "; ".join(r[0] for r in rows[:5])
    return found


def store_checks(db_path: Path, acked: dict[int, str], run: str) -> dict:
    """Independent reads of the database after the drain."""
    with _connect(db_path) as conn:
        texts = dict(conn.execute("SELECT id, text FROM documents"))
        tagged = {i for i, t in texts.items() if run in t}
        duplicates = conn.execute(
            "SELECT COUNT(*) FROM (SELECT text FROM documents WHERE instr(text, ?) > 0 "
            "GROUP BY text HAVING COUNT(*) > 1)", (run,)).fetchone()[0]
        bad_vectors = conn.execute(
            "SELECT COUNT(*) FROM documents d WHERE (SELECT COUNT(*) FROM vectors v "
            "WHERE v.kind = 'document' AND v.memory_id = d.id) != 1").fetchone()[0]
        without_stages = conn.execute(
            "SELECT COUNT(*) FROM documents d WHERE NOT EXISTS "
            "(SELECT 1 FROM memory_stages s WHERE s.memory_id = d.id)").fetchone()[0]
        unfinished = conn.execute(
            "SELECT memory_id, stage, status, attempts, lease_owner, last_error FROM memory_stages "
            "WHERE status != 'done' ORDER BY memory_id LIMIT 10").fetchall()
        stages = dict(conn.execute("SELECT status, COUNT(*) FROM memory_stages GROUP BY status"))
    lost = sorted(i for i in acked if i not in texts)
    changed = sorted(i for i, t in acked.items() if i in texts and texts[i] != t)
    return {"documents": len(texts), "lost": lost, "changed": changed,
            "unacknowledged": len(tagged - acked.keys()), "duplicates": duplicates,
            "bad_vectors": bad_vectors, "without_stages": without_stages,
            "unfinished": unfinished, "stages": stages}


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


def chaos(args, work: Path, data_dir: Path) -> bool:
    config = write_config(work / "chaos-config.yaml", data_dir)
    logs = work / "chaos-logs"
    logs.mkdir(exist_ok=True)
    cluster = Cluster(config, logs)
    run = f"chaos-{uuid.uuid4().hex[:8]}"
    tally, kills = Tally(), collections.Counter()
    print(f"chaos {run}: {args.duration:.0f} s, {args.clients} clients, 2 fronts + 2 workers, "
          f"kill -9 every ~{args.kill_every:.0f} s; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores\n  data_dir {data_dir}; logs {logs}", flush=True)
    try:
        cluster.start()
        stuck_clients = storm(args, cluster, run, tally, kills)
        cluster.stop()
        print("clients stopped; every process stopped; one worker started clean", flush=True)
        cluster.workers[0].start()
        drained = drain(data_dir / "aokun.db", args.drain_timeout)
        cluster.workers[0].stop()
    finally:
        cluster.kill()
    with tally.lock:
        acked = dict(tally.acked)
    found = store_checks(data_dir / "aokun.db", acked, run)
    doctor_exit, doctor_text = run_doctor(config)
    checked = integrity(data_dir)
    return report(tally, args.duration, kills, stuck_clients, found, drained, args.drain_timeout,
                  doctor_exit, doctor_text, checked)


def report(tally: Tally, duration: float, kills, stuck_clients: int, found: dict, drained: float | None,
           drain_timeout: float, doctor_exit: int, doctor_text: str, checked: dict,
           extra: list[str] = (), more_failures: list[str] = ()) -> bool:
    """Print the figures (extra: more lines after the kills) and RESULT; True when it passed.
    An integrity state beginning with "skipped" is said, not failed; more_failures fail too."""
    print()
    print(f"calls acknowledged: memorize {tally.answered['memorize']}, recall {tally.answered['recall']} "
          f"({sum(tally.answered.values()) / duration:.0f} calls/s)")
    print(f"calls failed (not acknowledged): {sum(tally.failed.values())}")
    for message, count in tally.failed.most_common():
        print(f"  {count:6d}  {message}")
    print(f"sessions that would not open: {sum(tally.open_failed.values())}")
    for message, count in tally.open_failed.most_common():
        print(f"  {count:6d}  {message}")
    print(f"kills: fronts {kills['front']}, workers {kills['worker']}")
    if tally.restarts:
        print(f"front restart to listening: median {statistics.median(tally.restarts):.1f} s, "
              f"max {max(tally.restarts):.1f} s ({len(tally.restarts)} restarts)")
    for line in extra:
        print(line)
    if stuck_clients:
        print(f"client threads still in a call after the stop: {stuck_clients}")
    lost = len(found["lost"]) + len(found["changed"])
    print(f"lost (acknowledged, then missing or changed): {lost}"
          + (f"  missing ids {found['lost'][:20]} changed ids {found['changed'][:20]}" if lost else ""))
    print(f"ids acknowledged twice: {len(tally.reused_ids)}")
    print(f"committed without acknowledgement (the reply was lost): {found['unacknowledged']}")
    print(f"duplicates (a text stored twice): {found['duplicates']}")
    print(f"memories without exactly one document vector: {found['bad_vectors']} "
          f"of {found['documents']}")
    print(f"stages: {found['stages']}; memories without stage rows: {found['without_stages']}")
    for row in found["unfinished"]:
        print(f"  not done: memory {row[0]} {row[1]} {row[2]} attempts {row[3]} "
              f"lease {row[4]} error {row[5]!r}")
    print("time to drain (1 worker, clean start): "
          + (f"{drained:.1f} s" if drained is not None else f"not drained within {drain_timeout:.0f} s"))
    print(f"doctor exit: {doctor_exit}")
    if doctor_exit != 0:
        print("  " + "\n  ".join(doctor_text.splitlines()[:30]))
    print("integrity: " + ", ".join(f"{name} {state}" for name, state in checked.items()))
    failures = [name for name, bad in (
        ("lost", lost), ("ids acknowledged twice", tally.reused_ids),
        ("duplicates", found["duplicates"]), ("vectors", found["bad_vectors"]),
        ("stages", found["unfinished"] or found["without_stages"] or drained is None),
        ("doctor", doctor_exit != 0),
        ("integrity", not checked or any(state != "ok" and not state.startswith("skipped")
                                         for state in checked.values()))) if bad]
    failures += [f"{name} not done" for name in more_failures]
    print("RESULT: " + ("PASS" if not failures else "FAIL (" + ", ".join(failures) + ")"))
    return not failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of calls and kills")
    parser.add_argument("--team", action="store_true",
                        help="a team deployment: two hosts on a PostgreSQL of the run's own and the "
                             "local Redis, one PostgreSQL restart and one Redis flush (scripts/chaos_team.py)")
    parser.add_argument("--clients", type=int, help="client threads (default 6; 4 with --team)")
    parser.add_argument("--kill-every", type=float, default=4.0, help="mean seconds between kills")
    parser.add_argument("--recall-share", type=float, default=0.2, help="share of calls that recall")
    parser.add_argument("--drain-timeout", type=float, default=600.0,
                        help="longest wait for the stages to finish after the run")
    parser.add_argument("--data-dir", type=Path, help="data_dir to use (default: a temporary one)")
    parser.add_argument("--seed", type=int, help="random seed for kills and texts")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if args.clients is None:
        args.clients = 4 if args.team else 6
    if args.team:
        if args.data_dir is not None:
            parser.error("--data-dir is for the SQLite run; --team makes its folders in a temporary one")
        import chaos_team  # scripts/, next to this file

        return chaos_team.main(args)
    if args.data_dir is not None:
        data_dir = args.data_dir.resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            return 0 if chaos(args, data_dir.parent, data_dir) else 1
        except RuntimeError as exc:
            print(f"chaos: {exc}", file=sys.stderr)
            return 1
    work = Path(tempfile.mkdtemp(prefix="aokun-chaos-"))
    try:
        passed = chaos(args, work, work / "data")
    except RuntimeError as exc:  # a process that would not start: its log says why
        print(f"chaos: {exc}", file=sys.stderr)
        passed = False
    if passed and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"work folder kept: {work}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
