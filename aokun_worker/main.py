"""`aokun-worker`: the Huey consumer for Aokun's background jobs."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from shared.config import load_config
from shared.errors import AokunError

log = logging.getLogger("aokun.worker")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="aokun-worker", description="Aokun Memory background worker")
    parser.add_argument("--config", help="config file (default: $AOKUN_CONFIG, else ./config.yaml)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # Idle OpenMP threads must sleep, not spin: the front shares these cores.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        config = load_config(args.config)
        from aokun_worker.service import WorkerService

        service = WorkerService.open(config)
    except AokunError as exc:
        print(f"aokun-worker: {exc}", file=sys.stderr)
        return 2
    return service.run()


if __name__ == "__main__":
    sys.exit(main())
