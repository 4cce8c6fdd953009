"""`aokun mcp-config`: how a host starts or reaches this install, ready to paste.

stdout is the `mcpServers` JSON block alone (so `aokun mcp-config > .mcp.json` works); stderr
says where it goes and gives the equivalent `claude mcp add` line. Paths are absolute: a host
starts a stdio server from its own working directory with a minimal environment (often no
PATH of ours), so the entry names this install's executable and config file itself. Secrets
(the HTTP token, API keys named by *.api_key_env) are written as ${VAR} references, which
Claude Code expands when it starts the server, unless --inline-secrets asks for their values.

The HTTP entry names the front that runs: a restart-only key saved since it started (the panel
writes server.port at once) would otherwise send the host to a port nothing listens on. The
front's heartbeat row holds the endpoint it is bound to; when that differs from the saved
server.host/port, the entry gets the running one, and stderr says so in one line. Its bearer
token is the caller's: AOKUN_TOKEN when this shell holds a user's token, else server.token.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from shared.config import CONFIG_ENV, LOCAL_TOKEN_ENV, TOKEN_ENV, AppConfig, require_config_file, secret
from shared.queue import secret_env_names as queue_secret_env_names
from shared.serving import http_url
from shared.store import face as store_face

TRANSPORTS = ("stdio", "http")
# ${VAR} as secret_env and http_entry write it; inside double quotes a POSIX shell expands it.
_REFERENCE = re.compile(r"\$\{(\w+)\}")


def add_parser(commands, with_config) -> None:
    """The mcp-config subcommand on the admin parser's subcommands."""
    parser = with_config(commands.add_parser(
        "mcp-config", help="print the mcpServers JSON block for this install (and the claude mcp add line)"))
    parser.add_argument("--transport", choices=TRANSPORTS, default="stdio",
                        help="stdio: the host starts the server (default); http: it connects to a running one")
    parser.add_argument("--name", default="aokun", help="the server's name in the host (default aokun)")
    parser.add_argument("--inline-secrets", action="store_true",
                        help="write the token and API keys themselves, not ${VAR} references "
                             "(for hosts that do not expand variables)")


def cmd_mcp_config(admin, args) -> int:
    config = admin.config
    inline = args.inline_secrets
    if args.transport == "stdio":
        entry, notes = stdio_entry(config, inline)
    else:
        entry, notes = http_entry(config, inline, running_endpoints_of(config))
    print(json.dumps({"mcpServers": {args.name: entry}}, indent=2, ensure_ascii=False))
    print(f"Put the block above in the host's MCP configuration, or add it to Claude Code with:\n"
          f"  {claude_add_line(args.name, entry, inline)}", file=sys.stderr)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def stdio_entry(config: AppConfig, inline: bool) -> tuple[dict, list[str]]:
    """command, args and env that start this install's server over stdio on this config."""
    require_config_file(config, "so the server a host starts opens the same store")
    assert config.source is not None  # require_config_file refuses a config read from no file
    command, args = server_command()
    source = Path(config.source).resolve()
    inspector = inspector_line([command, *args], source)
    # --transport stdio: a config whose server.transport is http must still speak stdio here.
    args += ["--transport", "stdio", "--config", str(source)]
    names = key_variables(config)
    env = secret_env(names, inline)
    notes = [f"{n} is not set here: the server reads a secret from it, so set it where the host "
             "runs, or put the key in the config file" for n in names if not secret("", n)]
    notes.append(f"to try it in the MCP Inspector, which keeps --config and --transport for itself, "
                 f"name the file with -e {CONFIG_ENV}=FILE: {inspector}")
    return {"type": "stdio", "command": command, "args": args, "env": env}, notes


def inspector_line(command: list[str], config: Path) -> str:
    """The MCP Inspector's CLI listing this server's tools (its own --config would swallow
    ours, so the file goes by $AOKUN_CONFIG; the server speaks stdio unless the file says
    server.transport: http)."""
    words = ["npx", "@modelcontextprotocol/inspector", "--cli", "-e", f"{CONFIG_ENV}={config}",
             *command, "--method", "tools/list"]
    return subprocess.list2cmdline(words) if os.name == "nt" else shlex.join(words)


def server_command() -> tuple[str, list[str]]:
    """The aokun-server executable beside this Python, else this Python running its module.
    Not resolved: a virtual environment's python is a link that must stay what it is."""
    python = Path(sys.executable).absolute()
    for name in ("aokun-server", "aokun-server.exe"):
        script = python.parent / name
        if script.is_file():
            return str(script), []
    return str(python), ["-m", "aokun_server.main"]


def key_variables(config: AppConfig) -> list[str]:
    """Environment variables the server reads secrets from: API keys (a key in the file needs
    none), the store's and the queue's passwords in team mode (a URL holding one needs none),
    and a user's token when this shell has one in AOKUN_TOKEN (the server then acts as that
    user)."""
    names = []
    if config.embedding.provider == "openai" and not config.embedding.api_key:
        names.append(config.embedding.api_key_env)
    if config.summarizer.base_url and not config.summarizer.api_key:  # provider=llm per call
        names.append(config.summarizer.api_key_env)
    names.extend(store_face.secret_env_names(config.storage))
    names.extend(queue_secret_env_names(config.queue))
    if os.environ.get(LOCAL_TOKEN_ENV):
        names.append(LOCAL_TOKEN_ENV)
    return list(dict.fromkeys(names))


def secret_env(names: list[str], inline: bool) -> dict[str, str]:
    """{name: ${name}}, or with inline its value here (a name without one is left out)."""
    if inline:
        return {n: value for n in names if (value := secret("", n))}
    return {n: f"${{{n}}}" for n in names}


def http_entry(config: AppConfig, inline: bool, running: Sequence[str] = ()) -> tuple[dict, list[str]]:
    """The URL of this config's HTTP front (the one running, when it is not at the saved
    address), with the caller's bearer token when there is one."""
    saved = http_url(config.server.host, config.server.port)
    url, notes = saved, []
    if running and saved not in running:
        url = running[0]
        notes.append(f"the running front listens at {url}, not at the saved server.host/port ({saved}), "
                     f"which it takes at its restart: wrote {url}")
    entry: dict = {"type": "http", "url": url}
    name, token = (LOCAL_TOKEN_ENV, os.environ[LOCAL_TOKEN_ENV]) if os.environ.get(LOCAL_TOKEN_ENV) \
        else (TOKEN_ENV, config.server.token)
    if token:
        reference = f"${{{name}}}"
        entry["headers"] = {"Authorization": f"Bearer {token if inline else reference}"}
        if not inline and not os.environ.get(name):
            notes.append(f"the server's token is in the config file, not in {TOKEN_ENV}: set that "
                         "variable where the host runs, or run again with --inline-secrets")
    return entry, notes


def running_endpoints_of(config: AppConfig) -> list[str]:
    """The endpoints of the live HTTP fronts of the config's store on this machine (none
    without a config file, or without a store: nothing is created to look)."""
    if config.source is None:
        return []
    # Lazy imports: the store only for --transport http (stdio needs no store at all).
    from shared.errors import AokunError
    from shared.store import open_store

    try:
        store = open_store(config.storage, migrate=False)
    except AokunError:
        return []
    try:
        return running_endpoints(config, store)
    finally:
        store.close()


def running_endpoints(config: AppConfig, store) -> list[str]:
    """Where the live HTTP fronts of this store on this machine listen, newest first; a front
    whose row has no endpoint (started by an older version) at the config's address."""
    alive_since = time.time() - config.worker.heartbeat_timeout_s
    try:
        fronts = store.runtime.live_fronts(alive_since)
    except Exception:  # a store from before fronts beat: none to find
        return []
    here = socket.gethostname()
    return list(dict.fromkeys(f.endpoint or http_url(config.server.host, config.server.port)
                              for f in fronts if f.kind == "http" and f.hostname == here))


def claude_add_line(name: str, entry: dict, inline: bool) -> str:
    """`claude mcp add` for the entry: options before the name, a stdio command after `--`.
    A ${VAR} reference is left for the shell to expand when the line is run."""
    words: list[str] = ["claude", "mcp", "add", "--transport", entry["type"], "--scope", "user"]
    if entry["type"] == "stdio":
        for key, value in entry["env"].items():
            words += ["--env", f"{key}={value}"]
        words += [name, "--", entry["command"], *entry["args"]]
    else:
        words += [name, entry["url"]]
        for key, value in entry.get("headers", {}).items():
            words += ["--header", f"{key}: {value}"]
    if os.name == "nt":
        line = subprocess.list2cmdline(words)
        return line if inline else _REFERENCE.sub(r"%\1%", line)
    return " ".join(f'"{w}"' if not inline and _REFERENCE.search(w) else shlex.quote(w) for w in words)

