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
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import yaml

from chaos_checks import drain, integrity, report, run_doctor, store_checks
from chaos_storm import Cluster, Tally, storm

# --- the run -----------------------------------------------------------------------------------

def write_config(path: Path, data_dir: Path) -> Path:
    """A small config: no autostart, a fast heartbeat, short leases and retries so that work
    abandoned by a killed worker is taken over within the run."""
    raw = {"storage": {"data_dir": str(data_dir)},
           "worker": {"autostart": False, "heartbeat_interval_s": 1.0},
           "queue": {"lease_s": 30, "reconcile_interval_s": 10, "retry_base_s": 1, "retry_max_s": 10}}
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


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
