"""`aokun hook`: memories put into a host's context without the host calling a tool.

Claude Code runs a command on UserPromptSubmit and SessionStart, passes the hook's JSON on
stdin ({"session_id", "transcript_path", "cwd", "hook_event_name", "prompt"} for a prompt,
{"hook_event_name": "SessionStart", "source": "startup"|"resume"|"clear"|"compact", ...} at
session start) and adds what the command prints on stdout, when it exits 0, to the model's
context. So:

- `aokun hook prompt` prints the memories relevant to the prompt (recall, above min_score,
  one line a memory as shared/search/answer.py renders them, fitted to --budget characters)
  under a short header, and nothing at all when nothing is relevant enough;
- `aokun hook session-start` prints a short profile within --budget: pinned memories,
  upcoming plans (planned atoms with a deadline ahead, soonest first) and the strongest
  preferences; nothing when there is none.

Plain form, for any host that can run a command: `aokun hook prompt "text"`, or the text on
stdin with `--plain`.

A hook must never break its host: on any failure (a bad config, no store, a bad argument,
stdin that is not the hook's JSON) it prints nothing on stdout, one line on stderr and exits 0
(exit 2 would make Claude Code refuse the user's prompt).

Where recall runs: a prompt goes to a running HTTP front of this store when there is one (its
heartbeat row says so; its endpoint and token are the config's server.host/port/token), as a
plain JSON-RPC POST over urllib: the official MCP client would cost ~0.4 s of imports in a
process that lives for one call, and the front has jieba and the embedder loaded already.
Without a front, recall opens the store read-only in this process (no migrations, no writes,
no access counts; a front's recall records them), from BM25 and graph keywords without vectors
(see recall_here for the measurement). A session-start profile is three SQL reads
and needs neither segmenter nor embedder, so it always reads the store directly.

Cold start: this module imports only the standard library at import time; everything heavier
is imported by the path that needs it, because a hook runs on every prompt.
"""

from __future__ import annotations

# Lazy imports: a hook runs before every prompt the host sends and its time is the user's wait
# (scripts/bench_hook.py), so each path imports only what it uses: the HTTP client when a front
# answers, the store and search when it recalls here, the profile at session start.

import argparse
import json
import sys
import time

EVENTS = ("prompt", "session-start")
CLAUDE_EVENT_NAMES = {"prompt": "UserPromptSubmit", "session-start": "SessionStart"}
PROMPT_BUDGET = 2000
PROFILE_BUDGET = 1200
PROMPT_HEADER = "Possibly relevant memories (Aokun; [id · relevance 0-1], best first):"
PROFILE_HEADER = "What Aokun remembers about the user:"
SECTIONS = (("pinned", "Pinned:"), ("plans", "Upcoming plans:"), ("preferences", "Preferences:"))
FRONT_TIMEOUT_S = 10.0
MAX_PROMPT_CHARS = 100_000  # what the recall tool reads of a query
PROTOCOL_VERSION = "2025-06-18"


class HookError(Exception):
    """Anything that stops the hook; reported as one line on stderr, exit status 0."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would exit 2: a hook's host reads that as "block"
        raise HookError(message)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("event", choices=EVENTS,
                        help="prompt (UserPromptSubmit) or session-start (SessionStart)")
    parser.add_argument("text", nargs="?",
                        help="the prompt itself (plain form); default: the hook's JSON on stdin")
    parser.add_argument("--plain", action="store_true",
                        help="stdin is the prompt's text, not a hook's JSON")
    parser.add_argument("--budget", type=int, metavar="CHARS",
                        help=f"most characters printed (default {PROMPT_BUDGET} for a prompt, "
                             f"{PROFILE_BUDGET} at session start)")
    parser.add_argument("--persona", help="only this persona's memories (default: every persona)")
    parser.add_argument("--min-score", type=float,
                        help="leave out memories scoring below this (default: retrieval.min_score)")
    parser.add_argument("--k", type=int,
                        help="most memories (a prompt; default memory.recall_top_k) or items a "
                             "section (session start; default 5)")
    parser.add_argument("--json", action="store_true",
                        help="print Claude Code's JSON form (hookSpecificOutput.additionalContext)")
    parser.add_argument("--no-front", action="store_true",
                        help="do not use a running front; read the store in this process")
    parser.add_argument("--verbose", action="store_true",
                        help="say on stderr where the memories came from and how long it took")
    return parser


def add_parser(commands, with_config) -> argparse.ArgumentParser:
    """The `hook` subcommand on the admin CLI's subparsers (for `aokun --help`; a hook call
    itself is parsed by main(), which never exits non-zero)."""
    return add_arguments(with_config(commands.add_parser(
        "hook", help="print memories for a host's prompt or session-start hook (never fails the host)")))


def hook_args(argv: list[str]) -> list[str] | None:
    """The arguments after `hook` when argv is an `aokun hook ...` call, else None.
    `--config FILE` may stand before `hook`, as for every aokun command."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--config":
            i += 2
        elif word.startswith("--config="):
            i += 1
        else:
            return argv[:i] + argv[i + 1:] if word == "hook" else None
    return None


def main(argv: list[str]) -> int:
    """Run one hook (argv: what follows `hook`); always 0. Output is printed whole or not at all."""
    verbose = "--verbose" in argv
    started = time.perf_counter()
    try:
        parser = add_arguments(_Parser(prog="aokun hook", description=__doc__.split("\n\n")[0]))
        parser.add_argument("--config", help="config file (default: $AOKUN_CONFIG, else ./config.yaml)")
        args = parser.parse_args(argv)
        _quiet_logs(args.verbose)
        text, source = run(args)
        if text:
            if args.json:
                text = json.dumps({"hookSpecificOutput": {
                    "hookEventName": CLAUDE_EVENT_NAMES[args.event], "additionalContext": text}},
                    ensure_ascii=False)
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        if args.verbose:
            print(f"aokun hook: {args.event}: {len(text)} chars from {source} in "
                  f"{(time.perf_counter() - started) * 1000:.0f} ms", file=sys.stderr)
    except SystemExit:  # --help has printed the help
        pass
    except BaseException as exc:  # noqa: BLE001 - a hook must never break its host
        print(f"aokun hook: {_one_line(exc)}", file=sys.stderr)
        if verbose and not isinstance(exc, HookError):
            import traceback

            traceback.print_exc()
    return 0


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, HookError) or type(exc).__module__.startswith("shared") \
        else f"{type(exc).__name__}: {text}"


def _quiet_logs(verbose: bool) -> None:
    """Our modules' warnings (a channel that failed, ...) would be lines on stderr beyond the
    one a hook may print; only --verbose shows them."""
    import logging

    logging.getLogger("aokun").setLevel(logging.WARNING if verbose else logging.CRITICAL + 1)


def run(args) -> tuple[str, str]:
    """(what to print, where it came from)."""
    from shared.config import load_config

    if args.budget is not None and args.budget < 1:
        raise HookError(f"--budget must be at least 1, got {args.budget}")
    if args.k is not None and args.k < 1:
        raise HookError(f"--k must be at least 1, got {args.k}")
    if args.min_score is not None and not 0.0 <= args.min_score <= 1.0:
        raise HookError(f"--min-score must be between 0 and 1, got {args.min_score}")
    if args.event == "prompt":
        prompt = read_prompt(args)  # before the config: a host's stdin is read either way
        config = load_config(args.config)
        if not prompt.strip():
            return "", "nowhere (empty prompt)"
        return prompt_context(config, prompt, args)
    read_hook_json(args)
    config = load_config(args.config)
    from aokun_admin.hook_profile import profile

    store = open_existing(config)
    try:
        text = profile(store, args.persona, args.k or 5, args.budget or PROFILE_BUDGET, PROFILE_HEADER,
                       SECTIONS)
    finally:
        store.close()
    return text, f"the store ({_where(config)})"


# -- input ----------------------------------------------------------------------------------


def read_prompt(args) -> str:
    if args.text is not None:
        return args.text
    raw = sys.stdin.read()
    if args.plain:
        return raw
    data = _hook_json(raw)
    prompt = data.get("prompt")
    if not isinstance(prompt, str):
        raise HookError("the hook's JSON on stdin has no prompt (use --plain for text on stdin)")
    return prompt


def read_hook_json(args) -> dict:
    """Session start needs nothing from the hook's JSON; read it so the host's pipe is drained,
    and check it only when something was sent."""
    if args.text is not None or args.plain or sys.stdin is None or sys.stdin.isatty():
        return {}
    raw = sys.stdin.read()
    return _hook_json(raw) if raw.strip() else {}


def _hook_json(raw: str) -> dict:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise HookError(f"stdin is not the hook's JSON ({exc.msg}); use --plain for text") from None
    if not isinstance(data, dict):
        raise HookError("the hook's JSON on stdin is not an object")
    return data


# -- the store ------------------------------------------------------------------------------


def open_existing(config):
    """The store, opened for reading as it is: never created, never migrated."""
    from shared.errors import StorageError
    from shared.store.schema import open_store

    try:
        return open_store(config.storage, migrate=False)
    except StorageError as exc:
        if exc.kind != "cannot_open":
            raise
        raise HookError(f"no memory store at {_where(config)} (check storage in the config)") from None


def _where(config) -> str:
    """Where the config's store is, for messages (never a password)."""
    if config.storage.backend == "postgresql":
        from shared.store.postgres.connection import where

        return f"postgresql {where(config.storage.url)}"
    return str(config.storage.db_path)


# -- a prompt -------------------------------------------------------------------------------


def prompt_context(config, prompt: str, args) -> tuple[str, str]:
    prompt = prompt[:MAX_PROMPT_CHARS]
    k = min(args.k or config.memory.recall_top_k, config.memory.recall_max_k)
    budget = args.budget or PROMPT_BUDGET
    room = budget - len(PROMPT_HEADER) - 1
    if room <= 0:
        return "", "nowhere (budget smaller than the header)"
    store = open_existing(config)
    try:
        url = None if args.no_front else front_url(config, store)
        hits, source = None, ""
        if url is not None:
            try:
                hits = FrontClient(url, config.server.token).recall(prompt, k, args.persona,
                                                                    args.min_score, room)
                source = f"the front at {url}"
            except HookError as exc:
                if args.verbose:
                    print(f"aokun hook: the front at {url} did not answer ({exc}); reading the store",
                          file=sys.stderr)
        if hits is None:
            hits, source = recall_here(config, store, prompt, k, args.persona, args.min_score, room)
    finally:
        store.close()
    # Both recalls left out what scores below the floors and fitted the lines to `room`.
    from shared.search import answer

    if not hits:
        return "", source
    return "\n".join([PROMPT_HEADER, *(answer.line(h) for h in hits)]), source


def front_url(config, store) -> str | None:
    """The endpoint of a live HTTP front of this store on this machine, or None. Fronts beat
    in the store; the endpoint is the config's server.host and server.port (a front started
    with another --port is not found there, and recall then runs here)."""
    import socket

    from aokun_admin.mcp_config import http_url

    alive_since = time.time() - config.worker.heartbeat_timeout_s
    try:
        fronts = store.runtime.live_fronts(alive_since)
    except Exception:  # noqa: BLE001 - an older store without the table: no front to find
        return None
    host = socket.gethostname()
    if not any(f.kind == "http" and f.hostname == host for f in fronts):
        return None
    return http_url(config.server.host, config.server.port)


def recall_here(config, store, prompt: str, k: int, persona: str | None, min_score: float | None,
                room: int) -> tuple[list, str]:
    """Recall in this process from BM25 and the graph's keyword channel, without vectors:
    measured with scripts/bench_hook.py on 300 memories, loading the embedder and both vector
    indexes put the hook's median from 2.6 s to 3.6 s (a busy 2-core machine), on top of
    jieba's dictionary (~1 s) that the keyword channels need anyway. Recall without vectors
    is what a front serves while its embedder is down; a running front serves every channel."""
    from dataclasses import replace

    from shared.search.channels import ChannelParts, build_channels
    from shared.search.recall import Recaller, RecallRequest, floors
    from shared.store.documents import DocumentFilter
    from shared.text.segment import Segmenter

    channels = tuple(c for c in config.retrieval.channels if c in ("bm25", "graph_keyword"))
    if not channels:
        raise HookError("retrieval.channels has neither bm25 nor graph_keyword, which recall "
                        "without a running front needs")
    retrieval = replace(config.retrieval, channels=channels, cache_enabled=False)
    recaller = Recaller(store, Segmenter(config.text),
                        build_channels(ChannelParts(store, retrieval, None, None, config.graph)), None, retrieval)
    try:
        hits = recaller.recall(RecallRequest(prompt, k, DocumentFilter(persona_id=persona),
                                             max_chars=room, **floors(config.retrieval, min_score)))
    finally:
        recaller.executor.shutdown(wait=False)
    return hits, f"the store ({'+'.join(channels)})"


# -- a running front ------------------------------------------------------------------------


class _Document:
    """What answer.line reads of a recalled memory, from a front's structured result."""

    def __init__(self, result: dict):
        self.id = result["id"]
        self.text = result["text"]
        self.fields = argparse.Namespace(persona_summary=result.get("persona_summary"))


class _Hit:
    def __init__(self, result: dict):
        self.document = _Document(result)
        self.score = float(result["score"])
        self.duplicates = tuple(result.get("duplicates") or ())


class FrontClient:
    """Just enough streamable-HTTP MCP for one tool call: initialize, initialized, the call,
    and the session's DELETE, each a POST over urllib (JSON or an SSE stream in reply)."""

    def __init__(self, url: str, token: str, timeout: float = FRONT_TIMEOUT_S):
        self.url, self.token, self.timeout = url, token, timeout
        self.session: str | None = None
        self._id = 0

    def recall(self, query: str, k: int, persona: str | None, min_score: float | None,
               max_chars: int) -> list[_Hit]:
        """The front's recall; without min_score, the front's configured floors apply."""
        arguments = {"query": query, "k": k, "max_chars": max_chars}
        if min_score is not None:
            arguments["min_score"] = min_score
        if persona is not None:
            arguments["persona_id"] = persona
        self._request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                     "clientInfo": {"name": "aokun-hook", "version": "1"}})
        try:
            self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            result = self._request("tools/call", {"name": "recall", "arguments": arguments})
            if result.get("isError"):
                raise HookError(f"recall failed: {_tool_text(result)}")
            structured = result.get("structuredContent") or {}
            return [_Hit(r) for r in structured.get("results", [])]
        finally:
            self._close()

    def _request(self, method: str, params: dict) -> dict:
        self._id += 1
        reply = self._post({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        if not isinstance(reply, dict):
            raise HookError(f"{method}: no JSON-RPC reply")
        if "error" in reply:
            raise HookError(f"{method}: {reply['error'].get('message', reply['error'])}")
        return reply.get("result") or {}

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.session:
            headers["mcp-session-id"] = self.session
            headers["mcp-protocol-version"] = PROTOCOL_VERSION
        return headers

    def _post(self, message: dict):
        import urllib.error
        import urllib.request

        request = urllib.request.Request(self.url, data=json.dumps(message).encode(),
                                         headers=self._headers(), method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                self.session = response.headers.get("mcp-session-id") or self.session
                body = response.read().decode("utf-8")
                kind = response.headers.get("content-type", "")
        except urllib.error.HTTPError as exc:
            raise HookError(f"HTTP {exc.code} from the front") from None
        except (urllib.error.URLError, OSError) as exc:
            raise HookError(f"cannot reach the front: {getattr(exc, 'reason', exc)}") from None
        if "id" not in message or not body.strip():
            return None
        if kind.startswith("text/event-stream"):
            return _sse_reply(body, message["id"])
        return json.loads(body)

    def _close(self) -> None:
        """End the session so that a front does not keep one per prompt."""
        if not self.session:
            return
        import urllib.request

        request = urllib.request.Request(self.url, headers=self._headers(), method="DELETE")
        try:
            urllib.request.urlopen(request, timeout=self.timeout).close()
        except Exception:  # noqa: BLE001 - the answer is in hand; the front expires sessions
            pass


def _sse_reply(body: str, message_id: int):
    """The JSON-RPC reply to message_id in a server-sent event stream."""
    for event in body.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in event.split("\n") if line.startswith("data:"))
        if data:
            reply = json.loads(data)
            if isinstance(reply, dict) and reply.get("id") == message_id:
                return reply
    return None


def _tool_text(result: dict) -> str:
    for block in result.get("content") or ():
        if block.get("type") == "text":
            return " ".join(block.get("text", "").split())[:300]
    return "no message"


if __name__ == "__main__":  # `python -m aokun_admin.hook prompt ...`: skips the admin CLI's imports
    sys.exit(main(sys.argv[1:]))
