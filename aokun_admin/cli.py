"""What the command lines say about themselves: `--version`, a description on every
subcommand's help page, what each maintenance action does, and the rule that a command which
opens a store needs a config file (implicit defaults would create ./data wherever it runs)."""

from __future__ import annotations

import argparse

from shared import __version__

VERSION = f"aokun {__version__}"

# What `aokun maintenance ACTION` does (shared/lifecycle.py); the periodic jobs run the same.
MAINTENANCE_ACTIONS = {
    "decay": "apply the daily importance decay for every day due since the last one",
    "archive": "archive old, unimportant, never-pinned memories (forgetting.auto_cleanup_*)",
    "atoms": "age atoms: active -> expired -> forgotten -> purged, with their graph entries",
    "backup": "write an online backup of the database and prune old ones (backup.keep_days)",
    "reconcile": "queue every stage that waits unqueued, and take back stuck ones",
    "all": "all of the above, in that order",
}

# Commands that open a store, or start processes that do: on built-in defaults they would
# create ./data in whatever folder they were typed in. `config` (prints the defaults), `hook`
# (never fails its host) and `mcp-config --transport http` (a URL only) run without one.
NEEDS_CONFIG_FILE = frozenset({
    "stats", "doctor", "status", "stop", "repair", "rebuild-index", "maintenance", "backup",
    "panel", "restore", "ingest", "run", "export", "import", "users", "migrate"})

def add_version(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--version`: prints "aokun <version>" and exits, even where a subcommand is required."""
    parser.add_argument("--version", action="version", version=VERSION,
                        help="print the version and exit")
    return parser


def maintenance_epilog() -> str:
    return "actions:\n" + "\n".join(f"  {name:<10} {text}" for name, text in MAINTENANCE_ACTIONS.items())


class DescribedSubParsers(argparse._SubParsersAction):
    """Subcommands whose help page opens with their one-line help as a sentence, unless a
    description is given."""

    def add_parser(self, name, **kwargs):
        if kwargs.get("help") and not kwargs.get("description"):
            kwargs["description"] = sentence(kwargs["help"])
        return super().add_parser(name, **kwargs)


def sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def described_subcommands(parser: argparse.ArgumentParser, **kwargs):
    """parser.add_subparsers(**kwargs), every subcommand described (DescribedSubParsers)."""
    parser.register("action", "parsers", DescribedSubParsers)
    return parser.add_subparsers(**kwargs)
