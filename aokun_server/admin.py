"""`aokun`: the admin command line. `--config` may stand before or after the subcommand."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from shared.config import AppConfig, load_config
from shared.errors import AokunError


def _with_config(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    # SUPPRESS keeps a subcommand's missing --config from hiding one given before it.
    parser.add_argument("--config", default=argparse.SUPPRESS,
                        help="config file (default: $AOKUN_CONFIG, else ./config.yaml)")
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = _with_config(argparse.ArgumentParser(prog="aokun", description="Aokun Memory admin"))
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _with_config(commands.add_parser("config", help="print the effective configuration"))
    _with_config(commands.add_parser("stats", help="print memory and table counts as JSON"))
    return parser


def cmd_config(config: AppConfig) -> int:
    print(json.dumps(_jsonable(dataclasses.asdict(config)), indent=2, ensure_ascii=False))
    return 0


def cmd_stats(config: AppConfig) -> int:
    from shared.store.documents import DocumentStore
    from shared.store.schema import open_database
    from shared.text.segment import Segmenter

    db = open_database(config.storage)
    try:
        store = DocumentStore(db, Segmenter(config.text))
        print(json.dumps({"documents": store.stats(), "tables": store.table_counts(),
                          "database": str(db.path)}, indent=2))
    finally:
        db.close()
    return 0


COMMANDS = {"config": cmd_config, "stats": cmd_stats}


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(getattr(args, "config", None))
        return COMMANDS[args.command](config)
    except AokunError as exc:
        print(f"aokun {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
