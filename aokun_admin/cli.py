"""What the command lines say about themselves: `--version`, a description on every
subcommand's help page, what each maintenance action does, the rule that a command which
opens a store needs a config file (implicit defaults would create ./data wherever it runs),
and how a command ends when whoever read its output has gone (`aokun stats | head`)."""

from __future__ import annotations

import argparse
import os
import sys

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

# How a command ends whose output pipe was closed by its reader: as a program killed by SIGPIPE
# (128 + 13), which is what a shell expects of `cmd | head`.
CLOSED_PIPE_EXIT = 141


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


def output_gone(error: BrokenPipeError) -> int:
    """CLOSED_PIPE_EXIT after `error` if our output's reader has gone (silence_closed_output);
    a broken pipe that is not ours (a socket) is raised again."""
    if not silence_closed_output():
        raise error
    return CLOSED_PIPE_EXIT


def silence_closed_output() -> bool:
    """If stdout or stderr is a pipe its reader has closed, point both at /dev/null (so that
    the flush at exit finds nothing to write either) and return True."""
    if not any(_reader_gone(stream) for stream in (sys.stdout, sys.stderr)):
        return False
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError, AttributeError):
                pass  # no such stream (embedded): nothing will be flushed to it
    finally:
        os.close(devnull)
    return True


def _reader_gone(stream) -> bool:
    """Whether `stream` is the write end of a pipe nobody reads any more."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return False
    try:
        import select

        poller = select.poll()
    except (ImportError, AttributeError):  # Windows: no poll; a broken pipe there is ours
        return True
    poller.register(fd, select.POLLOUT)
    return any(revents & select.POLLERR for _, revents in poller.poll(0))
