"""`aokun-worker`: the Huey consumer for Aokun's background jobs."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from pathlib import Path

from aokun_worker.rebuild import rebuild_index
from aokun_worker.service import WorkerService
from shared import __version__
from shared.assembly import open_services
from shared.config import AppConfig, load_config
from shared.errors import AokunError
from shared.logs import configure_logging

log = logging.getLogger("aokun.worker")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="aokun-worker", description="Aokun Memory's background worker: runs each memory's stages "
                                         "(embedding, extraction, graph) and the periodic upkeep jobs.")
    parser.add_argument("--version", action="version", version=f"aokun {__version__}")
    parser.add_argument("--config", help="config file (default: $AOKUN_CONFIG, else ./config.yaml)")
    parser.add_argument("--data-dir", type=Path, help="overrides storage.data_dir")
    parser.add_argument("--autostarted", action="store_true",
                        help="started by a front: exit after worker.idle_exit_s without fronts or work")
    parser.add_argument("--rebuild-index", action="store_true",
                        help="re-embed every memory with the configured embedder, then exit "
                             "(what `aokun rebuild-index` runs)")
    return parser.parse_args(argv)


def with_data_dir(config: AppConfig, data_dir: Path | None) -> AppConfig:
    """The config with storage.data_dir replaced (a relative path is taken from the cwd)."""
    if data_dir is None:
        return config
    storage = dataclasses.replace(config.storage, data_dir=data_dir.expanduser().resolve())
    return dataclasses.replace(config, storage=storage)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("INFO")
    # Idle OpenMP threads must sleep, not spin: the front shares these cores.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        config = with_data_dir(load_config(args.config), args.data_dir)
        configure_logging(worker_log_level(config))
        if args.rebuild_index:
            return _rebuild_index(config)

        service = WorkerService.open(config, autostarted=args.autostarted)
    except (AokunError, OSError) as exc:
        print(f"aokun-worker: {exc}", file=sys.stderr)
        return 2
    return service.run()


def worker_log_level(config: AppConfig) -> str:
    """INFO (a worker says what it does: start, upkeep, stop), or DEBUG when the config asks."""
    return "DEBUG" if config.server.log_level == "DEBUG" else "INFO"


def _rebuild_index(config: AppConfig) -> int:
    services = open_services(config, queued=False, embed_threads=config.embedding.threads)
    try:
        return rebuild_index(services)
    finally:
        services.close()


if __name__ == "__main__":
    sys.exit(main())
