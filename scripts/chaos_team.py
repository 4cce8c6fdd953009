"""The chaos run on a team deployment (`scripts/chaos.py --team`).

Two hosts, each a folder of its own (host-a, host-b: a config and a data_dir): a front on
127.0.0.1 and one on 127.0.0.2, a worker on each; the store on a PostgreSQL server of the run's
own (initdb'd in the work folder on a free port, so restarting it disturbs no one), the queue
on the local Redis under a queue name of the run's own (only its keys are deleted at the end).
The clients and the kill -9 loop are chaos.py's; in addition, at about 1/3 of the duration
PostgreSQL is restarted (`pg_ctl stop -m fast`, then start) and at about 2/3 every key of the
run's queue is deleted (a flush of the queue, not FLUSHALL: the Redis server is shared).

After the storm every process is stopped, one worker is started clean and the stage rows are
read from PostgreSQL until none is pending or running; then the checks of chaos.py, read from
PostgreSQL, `aokun doctor` on each host's config, and pg_amcheck (every heap table and B-tree
index of the run's database, --heapallindexed: each heap tuple found in its indexes).
"""

from __future__ import annotations

import collections
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import yaml

from bench_servers import PG_BIN, OwnPostgres, own_postgres_server
from chaos_checks import report, run_doctor
from chaos_storm import Cluster, Service, Tally, free_port, storm

REDIS_URL = "redis://127.0.0.1:6379/0"
DATABASE = "aokun_chaos"
HOSTS = (("host-a", "127.0.0.1"), ("host-b", "127.0.0.2"))


# --- the deployment --------------------------------------------------------------------------

def host_config(folder: Path, pg_url: str, queue_name: str, address: str) -> Path:
    """One host's config: the shared store and queue, a data_dir of its own; chaos.py's short
    leases and retries so that work abandoned by a killed worker is taken over within the run."""
    folder.mkdir(parents=True, exist_ok=True)
    raw = {"storage": {"backend": "postgresql", "url": pg_url, "data_dir": str(folder / "data")},
           "worker": {"autostart": False, "heartbeat_interval_s": 1.0},
           "queue": {"backend": "redis", "url": REDIS_URL, "name": queue_name, "lease_s": 30,
                     "reconcile_interval_s": 10, "retry_base_s": 1, "retry_max_s": 10},
           "server": {"host": address}}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


class TeamCluster(Cluster):
    """A front and a worker on each host; front A starts first (it creates the schema alone)."""

    def __init__(self, hosts: list[tuple[Path, str]]):
        self.fronts = [Service("front", config, config.parent / "front.log", free_port(), host=address,
                               label=f"front:{config.parent.name}") for config, address in hosts]
        self.workers = [Service("worker", config, config.parent / "worker.log",
                                label=f"worker:{config.parent.name}") for config, _ in hosts]
        self.services = self.fronts + self.workers


def _listening(front: Service) -> bool:
    try:
        socket.create_connection((front.host, front.port), timeout=0.2).close()
        return True
    except OSError:
        return False


def queue_keys(client, name: str) -> list[bytes]:
    """Every key of queue `name` (huey.redis.<name>, huey.schedule.<name>, ...): tests/servers.py."""
    return [key for key in client.scan_iter(match=f"huey.*.{name}*")
            if key.decode().split(".", 2)[2].split(".")[0] == name]


def delete_queue(client, name: str) -> int:
    keys = queue_keys(client, name)
    if keys:
        client.delete(*keys)
    return len(keys)


def pg_rows(url: str, sql: str, params: tuple = ()) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, connect_timeout=5) as conn:
        return conn.execute(sql, params).fetchall()


# --- what the clients saw, with times ----------------------------------------------------------

class TimedTally(Tally):
    """chaos_storm.Tally, plus when each memorize was acknowledged or failed (monotonic seconds)."""

    def __init__(self):
        super().__init__()
        self.acked_at: list[float] = []
        self.failed_at: list[float] = []

    def on_result(self, tool, arguments, result, ms):
        super().on_result(tool, arguments, result, ms)
        if tool == "memorize":
            with self.lock:
                (self.failed_at if result.is_error else self.acked_at).append(time.monotonic())

    def on_failure(self, tool, arguments, message, ms):
        super().on_failure(tool, arguments, message, ms)
        if tool == "memorize":
            with self.lock:
                self.failed_at.append(time.monotonic())


# --- the restart, the flush, and processes that die by themselves ------------------------------

class Disturbances:
    """At 1/3 of the storm a PostgreSQL restart, at 2/3 a flush of the run's queue; all along,
    a note of every process that exits by itself (not by our SIGKILL).

    The restart is measured on a serving deployment: no kill -9 from a little before it until a
    memorize is acknowledged again (the kill loop waits on the gate), processes that exited by
    themselves started again, both fronts listening and a memorize acknowledged before the stop."""

    def __init__(self, server: OwnPostgres, pg_url: str, redis_client, queue_name: str,
                 cluster: TeamCluster, duration: float, tally: TimedTally):
        self.server, self.pg_url, self.redis, self.queue_name = server, pg_url, redis_client, queue_name
        self.cluster, self.duration, self.tally = cluster, duration, tally
        self.seen: set[subprocess.Popen] = set()   # processes already noted as exited
        self.restart: dict = {}    # times (monotonic): begin, down, up; or error
        self.flush: dict = {}      # time, keys, open stage rows at that moment
        self.exited: list[tuple[float, str, int]] = []   # (seconds into the run, service, exit code)

    def __call__(self, stop: threading.Event, started: float, gate: threading.Lock) -> None:
        plan = [(self.duration / 3, "restart"), (2 * self.duration / 3, "flush")]
        while not stop.wait(0.5):
            self._note_exits(started)
            if plan and time.monotonic() - started >= plan[0][0]:
                if plan.pop(0)[1] == "restart":
                    self._restart_serving(stop, started, gate)
                else:
                    self._flush_queue(started)

    def _note_exits(self, started: float) -> list[Service]:
        """Note the processes that exited by themselves since the last look; all such, noted or not."""
        dead = []
        for service in self.cluster.services:
            proc = service.proc
            if proc is None or proc.poll() in (None, -9):
                continue
            dead.append(service)
            if proc not in self.seen:
                self.seen.add(proc)
                self.exited.append((time.monotonic() - started, service.name, proc.returncode))
                print(f"  {time.monotonic() - started:5.1f} s  {service.name} exited by itself "
                      f"(code {proc.returncode}); see {service.log_path}", flush=True)
        return dead

    def _restart_serving(self, stop: threading.Event, started: float, gate: threading.Lock) -> None:
        """Hold the kills; get every process up and a write through; restart; wait for a write."""
        with gate:
            self.restart["held"] = time.monotonic()
            for service in self._note_exits(started):
                print(f"  {time.monotonic() - started:5.1f} s  start {service.name} again", flush=True)
                service.start()
            waited = time.monotonic()
            if not self._serving(stop, waited, 90):
                self.restart["error"] = (f"not done: the fronts were not serving within "
                                         f"{time.monotonic() - waited:.0f} s (the storm ended or they would not start)")
                return
            self._restart_postgres(started)
            if "up" in self.restart:
                self._acked_since(stop, self.restart["up"], 60)
            self.restart["released"] = time.monotonic()

    def _serving(self, stop: threading.Event, since: float, timeout: float) -> bool:
        """Every front listening, then a memorize acknowledged; False on stop or after timeout."""
        deadline = since + timeout
        for front in self.cluster.fronts:
            while not _listening(front):
                if stop.wait(0.2) or time.monotonic() > deadline or front.proc.poll() is not None:
                    return False
        return self._acked_since(stop, time.monotonic(), deadline - time.monotonic())

    def _acked_since(self, stop: threading.Event, since: float, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not stop.wait(0.1) and time.monotonic() < deadline:
            with self.tally.lock:
                if self.tally.acked_at and self.tally.acked_at[-1] > since:
                    return True
        return False

    def _restart_postgres(self, started: float) -> None:
        print(f"  {time.monotonic() - started:5.1f} s  PostgreSQL: stop -m fast", flush=True)
        self.restart["begin"] = time.monotonic()
        self.server.stop("fast")
        self.restart["down"] = time.monotonic()
        try:
            self.server.start()
        except subprocess.CalledProcessError as exc:
            said = (exc.stderr or b"").decode(errors="replace").strip()
            self.restart["error"] = "did not start again: " + said[-500:]
            print(f"  PostgreSQL {self.restart['error']}", flush=True)
            return
        self.restart["up"] = time.monotonic()
        print(f"  {time.monotonic() - started:5.1f} s  PostgreSQL: started again "
              f"({self.restart['up'] - self.restart['begin']:.1f} s after the stop began)", flush=True)

    def _flush_queue(self, started: float) -> None:
        try:
            open_rows = pg_rows(self.pg_url, "SELECT COUNT(*) FROM memory_stages WHERE status IN "
                                             "('pending', 'running')")[0][0]
        except Exception as exc:  # a figure only
            open_rows = f"unknown ({type(exc).__name__})"
        self.flush = {"time": time.monotonic() - started, "keys": delete_queue(self.redis, self.queue_name),
                      "open": open_rows}
        print(f"  {self.flush['time']:5.1f} s  Redis: deleted the {self.flush['keys']} keys of queue "
              f"{self.queue_name} ({open_rows} stage rows pending or running)", flush=True)

    def not_done(self) -> list[str]:
        """The disturbances that did not happen (the run then fails: it did not test them)."""
        return ((["PostgreSQL restart"] if "up" not in self.restart else [])
                + (["Redis flush"] if not self.flush else []))

    def lines(self, tally: TimedTally) -> list[str]:
        """The figures of the restart, the flush and the self-exits, for chaos_checks.report."""
        return [self._restart_line(tally),
                (f"Redis flush at {self.flush['time']:.1f} s: {self.flush['keys']} queue keys deleted, "
                 f"{self.flush['open']} stage rows pending or running then" if self.flush
                 else "Redis flush: not reached (the storm ended first)"),
                f"processes that exited by themselves: {len(self.exited)}"] + [
                f"  at {t:5.1f} s {name} exit code {code}" for t, name, code in self.exited]

    def _restart_line(self, tally: TimedTally) -> str:
        r = self.restart
        if not r:
            return "PostgreSQL restart: not reached (the storm ended first)"
        if "error" in r:
            return f"PostgreSQL restart: {r['error']}"
        with tally.lock:
            acked, failed = sorted(tally.acked_at), sorted(tally.failed_at)
        head = (f"PostgreSQL restart: stop {r['down'] - r['begin']:.1f} s, start {r['up'] - r['down']:.1f} s "
                f"(no kill -9 for {r['released'] - r['held']:.1f} s around it); ")
        first_after = min((t for t in acked if t > r["up"]), default=None)
        if first_after is None:
            return head + "no memorize acknowledged after it"
        refused = sum(r["begin"] < t <= first_after for t in failed)
        during = sum(r["begin"] < t <= r["up"] for t in acked)
        return head + (f"writes refused until the next memorize acknowledged {first_after - r['up']:.1f} s after "
                       f"the start returned ({first_after - r['begin']:.1f} s after the stop began); "
                       f"{refused} memorize calls failed in that time, {during} acknowledged between the "
                       f"stop's beginning and the start's end")


# --- after the storm: drain and checks, read from PostgreSQL -------------------------------------

def stage_counts(url: str) -> dict[str, int]:
    return dict(pg_rows(url, "SELECT status, COUNT(*) FROM memory_stages GROUP BY status"))


def drain(url: str, timeout: float) -> float | None:
    """Seconds until no stage row is pending or running, or None after `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        counts = stage_counts(url)
        if not counts.get("pending") and not counts.get("running"):
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def store_checks(url: str, acked: dict[int, str], run: str) -> dict:
    """chaos_checks.store_checks, on PostgreSQL."""
    texts = dict(pg_rows(url, "SELECT id, text FROM documents"))
    tagged = {i for i, t in texts.items() if run in t}
    duplicates = pg_rows(url, "SELECT COUNT(*) FROM (SELECT text FROM documents WHERE strpos(text, %s) > 0 "
                              "GROUP BY text HAVING COUNT(*) > 1) AS twice", (run,))[0][0]
    bad_vectors = pg_rows(url, "SELECT COUNT(*) FROM documents d WHERE (SELECT COUNT(*) FROM vectors v "
                               "WHERE v.kind = 'document' AND v.memory_id = d.id) != 1")[0][0]
    without_stages = pg_rows(url, "SELECT COUNT(*) FROM documents d WHERE NOT EXISTS "
                                  "(SELECT 1 FROM memory_stages s WHERE s.memory_id = d.id)")[0][0]
    unfinished = pg_rows(url, "SELECT memory_id, stage, status, attempts, lease_owner, last_error "
                              "FROM memory_stages WHERE status != 'done' ORDER BY memory_id LIMIT 10")
    lost = sorted(i for i in acked if i not in texts)
    changed = sorted(i for i, t in acked.items() if i in texts and texts[i] != t)
    return {"documents": len(texts), "lost": lost, "changed": changed,
            "unacknowledged": len(tagged - acked.keys()), "duplicates": duplicates,
            "bad_vectors": bad_vectors, "without_stages": without_stages,
            "unfinished": unfinished, "stages": stage_counts(url)}


def amcheck(server: OwnPostgres) -> dict[str, str]:
    """pg_amcheck on the run's database: heap tables and B-tree indexes, each heap tuple looked
    up in its indexes (--heapallindexed); the amcheck extension is installed if missing."""
    program = PG_BIN / "pg_amcheck"
    name = f"pg_amcheck {DATABASE}"
    if not program.exists():
        return {name: f"skipped (no {program})"}
    done = subprocess.run([str(program), "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres",
                           "--install-missing", "--heapallindexed", "-d", DATABASE],
                          capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return {name: "ok"}
    return {name: f"exit {done.returncode}: " + " ".join((done.stdout + done.stderr).split())[:300]}


def doctors(configs: list[Path]) -> tuple[int, str, list[str]]:
    """`aokun doctor` on each host's config: (the first non-zero exit or 0, its text, lines)."""
    worst, text, lines = 0, "", []
    for config in configs:
        code, output = run_doctor(config)
        engines = [line.split(":")[0].strip() + (" reachable" if "reachable" in line else " NOT reachable")
                   for line in output.splitlines() if "engine:" in line]
        lines.append(f"doctor {config.parent.name}: exit {code}" + (f" ({', '.join(engines)})" if engines else ""))
        if code != 0 and worst == 0:
            worst, text = code, f"{config.parent.name}:\n{output}"
    return worst, text, lines


def log_lines(cluster: TeamCluster) -> list[str]:
    """How many tracebacks the fronts' and workers' logs hold (our errors are one line each),
    and the last lines of the last one in each."""
    counts, tails = [], []
    for service in cluster.services:
        text = service.log_path.read_text(errors="replace") if service.log_path.exists() else ""
        name = f"{service.config.parent.name}/{service.log_path.name}"
        counts.append(f"{name} {text.count('Traceback')}")
        if "Traceback" in text:
            tails += [f"  last traceback in {name} ends:"] + [
                f"    {line}" for line in traceback_end(text[text.rindex("Traceback"):])]
    return ["tracebacks in the logs: " + ", ".join(counts)] + tails


def traceback_end(text: str, frames: int = 2) -> list[str]:
    """The last frames and the exception line of the traceback `text` begins with."""
    lines = text.splitlines()[1:]
    end = next((i for i, line in enumerate(lines) if line and not line.startswith(" ")), len(lines) - 1)
    return [line.rstrip() for line in lines[max(0, end - 2 * frames):end + 1]]


# --- the run -----------------------------------------------------------------------------------

def team_chaos(args, work: Path, server: OwnPostgres, redis_client, queue_name: str) -> bool:
    pg_url = f"postgresql://postgres@127.0.0.1:{server.port}/{DATABASE}"
    configs = [host_config(work / folder, pg_url, queue_name, address) for folder, address in HOSTS]
    cluster = TeamCluster(list(zip(configs, (address for _, address in HOSTS))))
    run = f"chaos-{uuid.uuid4().hex[:8]}"
    tally, kills = TimedTally(), collections.Counter()
    disturbances = Disturbances(server, pg_url, redis_client, queue_name, cluster, args.duration, tally)
    print(f"chaos --team {run}: {args.duration:.0f} s, {args.clients} clients, 2 hosts (front + worker "
          f"each), kill -9 every ~{args.kill_every:.0f} s, PostgreSQL restart at ~{args.duration / 3:.0f} s, "
          f"Redis queue flush at ~{2 * args.duration / 3:.0f} s; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n  PostgreSQL 127.0.0.1:{server.port}/"
          f"{DATABASE} (log {server.folder / 'pg.log'}); Redis {REDIS_URL} queue {queue_name}\n"
          f"  hosts {work / 'host-a'}, {work / 'host-b'}", flush=True)
    try:
        cluster.start()
        stuck_clients = storm(args, cluster, run, tally, kills, disturbances)
        cluster.stop()
        print("clients stopped; every process stopped; one worker started clean", flush=True)
        cluster.workers[0].start()
        drained = drain(pg_url, args.drain_timeout)
        cluster.workers[0].stop()
    finally:
        cluster.kill()
    with tally.lock:
        acked = dict(tally.acked)
    found = store_checks(pg_url, acked, run)
    doctor_exit, doctor_text, doctor_lines = doctors(configs)
    extra = disturbances.lines(tally) + doctor_lines + log_lines(cluster) + [
        f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}"]
    passed = report(tally, args.duration, kills, stuck_clients, found, drained, args.drain_timeout,
                    doctor_exit, doctor_text, amcheck(server), extra, disturbances.not_done())
    if disturbances.exited and passed:
        print("(a process exited by itself: the work folder is kept for its log)")
        args.keep = True
    return passed


def redis_client():
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=10)
    client.ping()
    return client


def main(args) -> int:
    """chaos.py --team: 0 on PASS, 1 on FAIL, 2 when PostgreSQL's programs or Redis are missing."""
    if not OwnPostgres.available():
        print(f"chaos --team: no PostgreSQL programs in {PG_BIN} (initdb, pg_ctl) to run a server of "
              f"the run's own", file=sys.stderr)
        return 2
    try:
        client = redis_client()
    except Exception as exc:  # any failure to reach it is said in one line
        print(f"chaos --team: no Redis at {REDIS_URL} ({exc})", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="aokun-chaos-team-"))
    queue_name = f"aokun_chaos_{uuid.uuid4().hex[:12]}"
    passed = False
    try:
        with own_postgres_server(work / "pg", free_port()) as server:
            pg_admin(server.url, f'CREATE DATABASE "{DATABASE}"')
            passed = team_chaos(args, work, server, client, queue_name)
    except RuntimeError as exc:  # a process that would not start: its log says why
        print(f"chaos: {exc}", file=sys.stderr)
    finally:
        delete_queue(client, queue_name)
        client.close()
    if passed and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"work folder kept: {work}")
    return 0 if passed else 1


def pg_admin(url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql)

