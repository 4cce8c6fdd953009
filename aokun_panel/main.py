"""`aokun panel` / `aokun-panel`: the local web panel, on 127.0.0.1 only, behind a token."""

from __future__ import annotations

import argparse
import secrets
import sys

from aokun_panel.app import build_app, build_context
from shared import __version__
from shared.config import load_config, require_config_file
from shared.errors import AokunError
from shared.live_config import LiveConfig
from shared.logs import configure_logging, uvicorn_log_config
from shared.serving import bind_listener, describe_start_failure, interrupt_on_stop_signals

DEFAULT_PORT = 8765


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="aokun panel", description="Aokun Memory's local web panel: browse, search and forget "
                                        "memories, see the pipeline, change settings (127.0.0.1 only).")
    parser.add_argument("--version", action="version", version=f"aokun {__version__}")
    parser.add_argument("--config", help="config file (default: $AOKUN_CONFIG, else ./config.yaml)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging()
    try:
        return serve(args)
    except (AokunError, OSError) as exc:
        print(f"aokun panel: {describe_start_failure(exc)}", file=sys.stderr)
        return 2


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    config = load_config(args.config)
    require_config_file(config)  # on built-in defaults it would create ./data wherever it runs
    configure_logging(config.server.log_level)
    # Loopback only, whatever the config says.
    listener = bind_listener("127.0.0.1", args.port, owner="aokun panel", choose="--port")
    port = listener.getsockname()[1]
    token = secrets.token_urlsafe(24)
    ctx = build_context(LiveConfig(config), token)
    app = build_app(ctx, token, port)
    url = f"http://127.0.0.1:{port}/?token={token}"
    print(f"aokun panel: {url}", file=sys.stderr, flush=True)
    if not args.no_browser:
        import webbrowser

        webbrowser.open(url)
    server = uvicorn.Server(uvicorn.Config(app, log_level=config.server.log_level.lower(),
                                           log_config=uvicorn_log_config()))
    interrupt_on_stop_signals()  # the panel closes its reader on the way out, as the front does
    try:
        server.run(sockets=[listener])
    except KeyboardInterrupt:
        pass
    finally:
        listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
