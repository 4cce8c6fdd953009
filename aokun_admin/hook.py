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

Whose memories: the caller's (aokun_admin/caller.py). With a user's token (AOKUN_TOKEN, or
server.token in the user's config) the hook prints that user's personas only, on every path;
a token it cannot resolve (revoked, unknown) or a --persona the token does not hold prints
nothing and one line on stderr, whether a front or the store would have answered. Without a
token, on a store without users, the hook reads every persona, as it always did.

Where recall runs: a prompt goes to a running HTTP front of this store when there is one, with
the caller's token, as a plain JSON-RPC POST (hook_front.py): the front has jieba and the
embedder loaded already. The front is found by the note it keeps in data_dir
(shared/serving.announce_endpoint), so when it answers no store is opened here at all: the
front resolves the token against the store's users, as caller.py does. A front that refuses
is the answer: nothing is printed, and the store is not read instead; the store is read only
to say the refusal in the words the store path would use (a persona the token lacks, a
revoked token), so the line does not depend on who answered. Without a note, the store is
opened and its fronts' heartbeat rows say where one listens. Without a front (or one that
cannot be reached), recall opens the store read-only in this process (no migrations, no
writes, no access counts; a front's recall records them), from BM25 and graph keywords
without vectors (see recall_here for the measurement), once per persona the caller may read,
merged by score as the recall tool merges them. A session-start profile is a few SQL reads
per persona and needs neither segmenter nor embedder, so it always reads the store directly.

Cold start: this module imports only the standard library at import time, and `aokun`'s entry
point (main.py) nothing else before a hook; everything heavier is imported by the path that
needs it, because a hook runs on every prompt.
"""

from __future__ import annotations

# Lazy imports: a hook runs before every prompt the host sends and its time is the user's wait
# (scripts/bench_hook.py), so each path imports only what it uses: the HTTP client when a front
# answers, the store and search when it recalls here, the profile at session start.

import argparse
import json
import sys
import time

from aokun_admin.hook_front import FrontUnreachable, HookError

EVENTS = ("prompt", "session-start")
CLAUDE_EVENT_NAMES = {"prompt": "UserPromptSubmit", "session-start": "SessionStart"}
PROMPT_BUDGET = 2000
PROFILE_BUDGET = 1200
PROMPT_HEADER = "Possibly relevant memories (Aokun; [id · relevance 0-1], best first):"
PROFILE_HEADER = "What Aokun remembers about the user:"
SECTIONS = (("pinned", "Pinned:"), ("plans", "Upcoming plans:"), ("preferences", "Preferences:"),
            ("others", "About other people:"))
MAX_PROMPT_CHARS = 100_000  # what the recall tool reads of a query


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
        from aokun_admin.cli import silence_closed_output

        if isinstance(exc, BrokenPipeError) and silence_closed_output():
            return 0  # the host stopped reading: there is nobody to tell
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
    from shared.time_zone import user_zone

    store = open_existing(config)
    try:
        personas = readable_personas(config, store, args.persona)
        text = profile(store, personas, args.k or 5, args.budget or PROFILE_BUDGET, PROFILE_HEADER,
                       SECTIONS, user_zone(config.memory.time_zone))
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


def readable_personas(config, store, persona: str | None) -> tuple[str | None, ...]:
    """The persona scopes the caller may read here (shared/access.read_personas: the one named,
    if held; else each of a user's personas; (None,) for the admin: every persona), or
    AccessDenied, printed as the hook's one line."""
    from aokun_admin.caller import caller
    from shared.access import read_personas

    return read_personas(caller(store, config), persona)


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
    asked = None
    if not args.no_front:
        from shared.serving import announced_endpoints

        # The front's note in data_dir: no store is opened when the front answers.
        for asked in announced_endpoints(config.storage)[:1]:
            hits = ask_front(config, asked, prompt, k, room, args, None)
            if hits is not None:
                return _lines(hits), f"the front at {asked}"
    store = open_existing(config)
    try:
        # Checked here first, so a persona out of the token's reach is refused in the same
        # words whether a front or the store would answer.
        personas = readable_personas(config, store, args.persona)
        if not personas:
            return "", "nowhere (the token holds no persona)"
        url = None if args.no_front else front_url(config, store)
        hits, source = None, ""
        if url is not None and url != asked:
            hits = ask_front(config, url, prompt, k, room, args, store)
            source = f"the front at {url}"
        if hits is None:
            hits, source = recall_here(config, store, prompt, k, personas, args.min_score, room)
    finally:
        store.close()
    return _lines(hits), source


def ask_front(config, url: str, prompt: str, k: int, room: int, args, store) -> list | None:
    """The front's recall as the caller (its token: the front resolves it against the store's
    users, as aokun_admin/caller.py does), or None when no front answered there. A refusal
    ends the hook (the store is not read instead); it is said as the store path would say it
    when the caller's own check refuses too, so the words do not depend on who answered."""
    from aokun_admin.caller import caller_token
    from aokun_admin.hook_front import FrontClient, FrontRefused

    try:
        return FrontClient(url, caller_token(config)[0]).recall(prompt, k, args.persona, args.min_score, room)
    except FrontRefused:
        own_check(config, args.persona, store)
        raise
    except FrontUnreachable as exc:
        if args.verbose:
            print(f"aokun hook: the front did not answer ({exc}); reading the store", file=sys.stderr)
        return None


def own_check(config, persona: str | None, store) -> None:
    """The caller's scope checked against the store (AccessDenied when it refuses); nothing
    when the store cannot be read: the front's refusal is then the word."""
    from shared.errors import AccessDenied

    try:
        if store is not None:
            readable_personas(config, store, persona)
            return
        opened = open_existing(config)
        try:
            readable_personas(config, opened, persona)
        finally:
            opened.close()
    except AccessDenied:
        raise
    except Exception:  # noqa: BLE001 - no store here to word it: the front's refusal stands
        return


def _lines(hits) -> str:
    """The header and one line a memory; "" for none. Both recalls left out what scores
    below the floors and fitted the lines to the budget."""
    from shared.search import answer

    if not hits:
        return ""
    return "\n".join([PROMPT_HEADER, *(answer.line(h) for h in hits)])


def front_url(config, store) -> str | None:
    """The endpoint of a live HTTP front of this store on this machine, or None. Fronts beat
    in the store with the endpoint they listen on: the config's server.host/port when one
    listens there, else the newest front's (started with --port, or before a restart-only
    port was saved)."""
    from aokun_admin.mcp_config import running_endpoints
    from shared.serving import http_url

    running = running_endpoints(config, store)
    saved = http_url(config.server.host, config.server.port)
    return saved if saved in running else (running[0] if running else None)


def recall_here(config, store, prompt: str, k: int, personas: tuple[str | None, ...],
                min_score: float | None, room: int) -> tuple[list, str]:
    """Recall in this process from BM25 and the graph's keyword channel, without vectors:
    measured with scripts/bench_hook.py on 300 memories, loading the embedder and both vector
    indexes put the hook's median from 2.6 s to 3.6 s (a busy 2-core machine), on top of
    jieba's dictionary (~1 s) that the keyword channels need anyway. Recall without vectors
    is what a front serves while its embedder is down; a running front serves every channel."""
    from dataclasses import replace

    from shared.search import answer
    from shared.search.channels import ChannelParts, build_channels
    from shared.search.recall import Recaller, RecallRequest, floors
    from shared.store.documents import DocumentFilter
    from shared.text.segment import Segmenter
    from shared.time_zone import user_zone

    channels = tuple(c for c in config.retrieval.channels if c in ("bm25", "graph_keyword"))
    if not channels:
        raise HookError("retrieval.channels has neither bm25 nor graph_keyword, which recall "
                        "without a running front needs")
    retrieval = replace(config.retrieval, channels=channels, cache_enabled=False)
    recaller = Recaller(store, Segmenter(config.text),
                        build_channels(ChannelParts(store, retrieval, None, None, config.graph)), None, retrieval)
    floor = floors(config.retrieval, min_score)
    try:
        zone = user_zone(config.memory.time_zone)
        runs = [recaller.recall(RecallRequest(prompt, k, DocumentFilter(persona_id=persona),
                                              max_chars=room, zone=zone, **floor)) for persona in personas]
    finally:
        recaller.executor.shutdown(wait=False)
    # Scores are probabilities of relevance, comparable across personas: the best k of all.
    hits = runs[0] if len(runs) == 1 else answer.fit(
        sorted((hit for run in runs for hit in run), key=lambda hit: -hit.score)[:k], room)
    return hits, f"the store ({'+'.join(channels)})"


if __name__ == "__main__":  # `python -m aokun_admin.hook prompt ...`: skips the admin CLI's imports
    sys.exit(main(sys.argv[1:]))
