"""`aokun-worker`: the Huey consumer for Aokun's background jobs."""

from __future__ import annotations

import argparse
import logging
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
    try:
        config = load_config(args.config)
        from aokun_worker.heartbeat import Heartbeat
        from shared.queue import open_queue
        from shared.store.schema import open_database

        db = open_database(config.storage)
        huey = open_queue(config.storage)
    except AokunError as exc:
        print(f"aokun-worker: {exc}", file=sys.stderr)
        return 2
    heartbeat = Heartbeat(db)
    heartbeat.start()
    # SIGTERM (what honcho and systemd send) must be graceful: a running job finishes.
    consumer = huey.create_consumer(workers=config.worker.threads, worker_type="thread",
                                    periodic=False, initial_delay=0.1, backoff=1.15,
                                    max_delay=0.5, graceful_signal="TERM")
    log.info("worker %s consuming %s", heartbeat.worker_id, config.storage.queue_path)
    try:
        consumer.run()
    finally:
        heartbeat.stop()
        db.close()
        log.info("worker %s stopped", heartbeat.worker_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
