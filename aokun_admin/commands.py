"""`aokun`'s commands: the admin command line (aokun_admin/main.py starts it for every command
but a hook). `--config` may stand before or after the subcommand."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from aokun_admin import hook, migrate, run_all, users
from aokun_admin.cli import NEEDS_CONFIG_FILE, add_version, described_subcommands, maintenance_epilog, output_gone
from aokun_admin.health import cmd_doctor, cmd_status, cmd_stop, embedder_space
from aokun_admin.ingest import cmd_ingest, ingest_parser
from aokun_admin.mcp_config import add_parser as mcp_config_parser
from aokun_admin.mcp_config import cmd_mcp_config
from aokun_admin.transfer import add_parsers as add_transfer_parsers
from aokun_admin.transfer import cmd_export, cmd_import
from shared.assembly import Services, open_services
from shared.config import AppConfig, load_config, require_config_file
from shared.errors import AokunError
from shared.lifecycle import ACTIONS, run_action
from shared.logs import configure_logging
from shared.store import face as store_face
from shared.store import open_store, restore

# Lazy imports: `aokun panel` and `aokun rebuild-index` start the panel's and the worker's entry
# points only when those commands run (the dispatcher imports nothing else of theirs), and
# `aokun stats` alone loads the API models (pydantic, about 0.2 s).


def _with_config(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    # SUPPRESS keeps a subcommand's missing --config from hiding one given before it.
    parser.add_argument("--config", default=argparse.SUPPRESS,
                        help="config file (default: $AOKUN_CONFIG, else ./config.yaml)")
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = add_version(_with_config(argparse.ArgumentParser(
        prog="aokun", description="Aokun Memory's admin command line: run the processes, inspect, "
                                  "repair, back up and move a store. `aokun COMMAND --help` for one.")))
    commands = described_subcommands(parser, dest="command", required=True, metavar="COMMAND")
    _with_config(commands.add_parser("config", help="print the effective configuration"))
    _with_config(commands.add_parser("stats", help="print memory and table counts as JSON"))
    _with_config(commands.add_parser("doctor", help="check consistency; exit 0 only when consistent"))
    status = _with_config(commands.add_parser(
        "status", help="list live workers and fronts, the queue, and how long until every memory "
                       "is searchable by meaning"))
    status.add_argument("--follow", action="store_true",
                        help="then show a progress bar of memories becoming searchable by meaning "
                             "until none waits (Ctrl-C stops following)")
    stop = _with_config(commands.add_parser("stop", help="stop this data_dir's workers on this host, gracefully"))
    stop.add_argument("--timeout", type=float, default=60.0,
                      help="seconds to wait for running jobs to finish (default 60)")
    repair = _with_config(commands.add_parser("repair", help="find failed stages; --apply retries them"))
    repair.add_argument("--apply", action="store_true", help="retry what was found")
    _with_config(commands.add_parser(
        "rebuild-index", help="re-embed every memory with the configured embedder"))
    maintenance = _with_config(commands.add_parser(
        "maintenance", help="run one upkeep job now (what the worker runs periodically) and report it",
        epilog=maintenance_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter))
    maintenance.add_argument("action", choices=ACTIONS, metavar="ACTION",
                             help=f"one of {', '.join(ACTIONS)} (below)")
    _with_config(commands.add_parser("backup", help="write an online backup; prints its path last"))
    panel = _with_config(commands.add_parser("panel", help="the local web panel (prints its URL with a token)"))
    panel.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765)")
    panel.add_argument("--no-browser", action="store_true", help="do not open a browser")
    restore = _with_config(commands.add_parser("restore", help="restore a backup into data_dir (processes stopped)"))
    restore.add_argument("file", type=Path)
    ingest_parser(_with_config(commands.add_parser(
        "ingest", help="summarize a transcript file and memorize it once; prints the memory id last")))
    mcp_config_parser(commands, _with_config)
    run_all.add_parser(commands, _with_config)
    add_transfer_parsers(commands, _with_config)
    hook.add_parser(commands, _with_config)
    users.add_parser(commands, _with_config)
    migrate.add_parser(commands, _with_config)
    return parser


class Admin:
    """Opens what a command needs (shared/assembly.py), on first use, and closes it at the end."""

    def __init__(self, config: AppConfig):
        self.config = config
        self._services: Services | None = None

    @property
    def services(self) -> Services:
        if self._services is None:
            self._services = open_services(self.config, embed_threads=self.config.embedding.threads)
        return self._services

    @property
    def store(self):
        return self.services.store

    def memories(self, queued: bool = True):
        """The memory service, queueing through the Huey queue like a front; queued=False
        leaves the stages to requeue() (a bulk import queues once at its end)."""
        if queued:
            return self.services.memories
        return Services(self.services.live, self.store, queued=False).memories

    def requeue(self) -> int:
        """Queue every stage that waits unqueued (the reconciler's pass); return how many."""
        return self.services.reconcile().enqueued

    def close(self) -> None:
        if self._services is not None:
            self._services.close()


def cmd_config(admin: Admin, args) -> int:
    print(json.dumps(_jsonable(dataclasses.asdict(admin.config)), indent=2, ensure_ascii=False))
    return 0


def cmd_stats(admin: Admin, args) -> int:
    from shared.api.figures import summarizer_figures

    store = admin.store
    print(json.dumps({"documents": store.documents.stats(), "tables": store.consistency.table_counts(),
                      "queue": store.stages.queue_figures(time.time()),
                      "summarizer": summarizer_figures(store, admin.config.summarizer).model_dump(),
                      "database": store.location}, indent=2))
    return 0


def cmd_repair(admin: Admin, args) -> int:
    """Find failed stages and missing derived rows; with --apply, redo those stages."""
    store = admin.store
    failed = store.stages.failed_stages(limit=1_000_000)
    for memory_id, stage, attempts, error in failed[:50]:
        print(f"failed: memory {memory_id} {stage} ({attempts} attempts): {error}")
    model, _ = embedder_space(admin.config, store)
    missing = store.consistency.missing_outputs(model)
    for name, ids in missing.items():
        if ids:
            print(f"missing {name}: {len(ids)} memories (e.g. {', '.join(map(str, ids[:5]))})")
    if not args.apply:
        print(f"{len(failed)} failed stage(s), {sum(map(len, missing.values()))} missing output(s);"
              " run with --apply to redo them")
        return 0
    memories = admin.memories()
    retried = memories.retry_failed()
    redone = memories.redo_missing(missing)
    queued = admin.requeue()
    print(f"{retried} failed stage(s) set to retry; {redone} stage(s) redone for missing output;"
          f" {queued} queued for the workers")
    return 0


def cmd_rebuild_index(admin: Admin, args) -> int:
    """Re-embed every memory: the worker's own stage runner does it (aokun_worker.main)."""
    from aokun_worker.main import main as worker_main

    admin.close()  # the worker process opens the store itself
    return worker_main(["--rebuild-index", *_config_args(args)])


def _config_args(args) -> list[str]:
    config = getattr(args, "config", None)
    return ["--config", str(config)] if config else []


def cmd_maintenance(admin: Admin, args) -> int:
    report = run_action(args.action, admin.services.lifecycle, lambda: {"queued": admin.requeue()}, time.time())
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


def cmd_backup(admin: Admin, args) -> int:
    print(admin.services.lifecycle.backup(time.time())["path"])
    return 0


def cmd_restore(admin: Admin, args) -> int:
    storage = admin.config.storage
    live = []
    if store_face.may_exist(storage):
        probe = None
        try:
            probe = open_store(storage, migrate=False)
            live = probe.runtime.live_workers(time.time() - admin.config.worker.heartbeat_timeout_s)
        except Exception:
            live = []  # a damaged database is what a restore is for
        finally:
            if probe is not None:
                probe.close()
    target = restore(args.file.resolve(), storage, live)
    print(f"restored {args.file} into {target}")
    return 0


def cmd_panel(admin: Admin, args) -> int:
    from aokun_panel.main import serve

    return serve(argparse.Namespace(config=getattr(args, "config", None), port=args.port,
                                    no_browser=args.no_browser))


COMMANDS = {"panel": cmd_panel, "config": cmd_config, "stats": cmd_stats, "doctor": cmd_doctor,
            "status": cmd_status, "stop": cmd_stop,
            "repair": cmd_repair, "rebuild-index": cmd_rebuild_index,
            "maintenance": cmd_maintenance, "backup": cmd_backup, "restore": cmd_restore,
            "ingest": cmd_ingest, "mcp-config": cmd_mcp_config, "run": run_all.cmd_run,
            "export": cmd_export, "import": cmd_import, "users": users.cmd_users,
            "migrate": migrate.cmd_migrate}


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def main(argv: list[str] | None = None) -> int:
    """Run one command; its output to a pipe closed early (`aokun stats | head`) ends it
    quietly (exit 141) instead of with a traceback."""
    try:
        code = _run(argv)
        sys.stdout.flush()  # output still buffered meets the closed pipe here, not at exit
        return code
    except BrokenPipeError as error:
        return output_gone(error)


def _run(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    configure_logging("WARNING")
    try:
        config = load_config(getattr(args, "config", None))
        if args.command in NEEDS_CONFIG_FILE:
            require_config_file(config)
        admin = Admin(config)
    except AokunError as exc:
        print(f"aokun {args.command}: {exc}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[args.command](admin, args)
    except AokunError as exc:
        print(f"aokun {args.command}: {exc}", file=sys.stderr)
        return 2
    finally:
        admin.close()

