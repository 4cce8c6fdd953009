"""`aokun-server`: the MCP front, over stdio (default) or streamable HTTP."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from aokun_server import http
from aokun_server.app import build_front
from shared import __version__
from shared.config import AppConfig, load_config
from shared.errors import AokunError
from shared.logs import configure_logging
from shared.serving import (
    announce_endpoint,
    bind_listener,
    describe_start_failure,
    http_url,
    interrupt_on_stop_signals,
    withdraw_endpoint,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="aokun-server", description="Aokun Memory's MCP server (the front): over stdio, started by "
                                         "an MCP host, or over streamable HTTP with --transport http.")
    parser.add_argument("--version", action="version", version=f"aokun {__version__}")
    parser.add_argument("--config", help="config file (default: $AOKUN_CONFIG, else ./config.yaml)")
    parser.add_argument("--transport", choices=("stdio", "http"), help="overrides server.transport")
    parser.add_argument("--host", help="HTTP bind address (overrides server.host)")
    parser.add_argument("--port", type=int, help="HTTP port (overrides server.port)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging()  # before the MCP SDK would set up its own (server.log_level once read)
    # One OpenMP thread for the query embedder (its count is fixed when the engine first
    # loads), sleeping when idle: spinning threads on a busy machine slow each query many times
    # over (docs/performance.md, Recall speed).
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        return serve(args)
    except (AokunError, OSError) as exc:
        # Start-up failures (unwritable data_dir, busy port, bad config...) are one line.
        print(f"aokun-server: {describe_start_failure(exc)}", file=sys.stderr)
        return 2


def serve(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    configure_logging(config.server.log_level)
    transport = args.transport or config.server.transport
    if transport == "http":
        return serve_http(config, args.host or config.server.host, args.port or config.server.port)
    if sys.stdin.isatty():
        # A host never gives a terminal as stdin: a person typed the command. Say what this is
        # and leave, before anything starts (no store opened, no worker autostarted).
        print(terminal_help(config), file=sys.stderr)
        return 0
    front = start_front(config, "stdio")
    try:
        front.server.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        front.close()
    return 0


def terminal_help(config: AppConfig) -> str:
    """What `aokun-server` says when started by hand on a terminal for stdio."""
    config_file = str(config.source) if config.source is not None else "FILE"
    bin_dir = Path(sys.executable).absolute().parent
    scripts = [p for p in (bin_dir / "aokun-server", bin_dir / "aokun-server.exe") if p.is_file()]
    command = str(scripts[0]) if scripts else f"{sys.executable} -m aokun_server.main"
    return (
        "aokun-server: Aokun Memory's MCP server speaks JSON-RPC over stdin/stdout to an MCP host\n"
        "(Claude Code, Claude Desktop, ...), which starts it; typed in a terminal it has no host to\n"
        "talk to, so it exits without starting anything.\n"
        "  connect a host:   aokun mcp-config   (the block to paste, and the `claude mcp add` line)\n"
        "  try it yourself:  aokun run          (the front over HTTP, a worker and the web panel)\n"
        "  or the MCP Inspector, which keeps --config for itself, with the file in AOKUN_CONFIG:\n"
        f"    npx @modelcontextprotocol/inspector --cli -e AOKUN_CONFIG={config_file} "
        f"{command} --method tools/list\n"
        "  serve HTTP here:  aokun-server --transport http"
        + ("" if config.source is not None else
           "\n  no config file was found: give one with --config FILE or AOKUN_CONFIG=FILE"))


def serve_http(config: AppConfig, host: str, port: int) -> int:
    # Bound before the slow start-up: a busy port fails at once, and nothing starts for nothing.
    listener = bind_listener(host, port)
    interrupt_on_stop_signals()
    try:
        # Where clients reach this front, as bound: its heartbeat row tells them, and a note in
        # data_dir tells a prompt hook without a store read.
        front = start_front(config, "http", http_url(host, port))
        note = None
        try:
            note = announce_endpoint(config.storage, http_url(host, port))
            print(f"aokun-server: MCP over streamable HTTP at http://{host}:{port}/mcp",
                  file=sys.stderr, flush=True)
            http.serve_http(front, listener, host)
        finally:
            if note is not None:
                withdraw_endpoint(note)
            front.close()
    except KeyboardInterrupt:
        pass  # Ctrl-C or a stop signal, while serving or still starting: a clean exit
    finally:
        listener.close()
    return 0


def start_front(config: AppConfig, transport: str, endpoint: str | None = None):
    """A built front, beating and warming up; a stdio front (launched by a host) also makes
    sure a worker runs."""
    front = build_front(config)
    front.start_background(autostart_worker=transport == "stdio", transport=transport, endpoint=endpoint)
    return front



if __name__ == "__main__":
    sys.exit(main())
