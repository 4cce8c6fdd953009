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
  upcoming plans (planned atoms with a deadline ahead, soonest first), the strongest
  preferences, and other people's plans and preferences, each named; nothing when there is none.

Plain form, for any host that can run a command: `aokun hook prompt "text"`, or the text on
stdin with `--plain`.

A hook must never break its host: on any failure (a bad config, no store, a bad argument,
stdin that is not the hook's JSON) it prints nothing on stdout, one line on stderr and exits 0
(exit 2 would make Claude Code refuse the user's prompt).

Whose memories: the caller's (aokun_admin/caller.py). With a user's token (AOKUN_TOKEN, or
server.token in the user's config) the hook prints that user's personas only, on every path;
a token it cannot resolve (revoked, unknown) or a --persona the token does not hold prints
nothing and one line on stderr, whether a front or the store would have answered. Without a
token, on a store without users, the hook reads every persona (the admin's scope).

Where recall runs: a prompt goes to a running HTTP front of this store when there is one, with
the caller's token, as a plain JSON-RPC POST (hook_front.py): the front has jieba and the
embedder loaded already. The front is found by the note it keeps in data_dir
(shared/serving.announce_endpoint), so when it answers no store is opened here at all: the
front resolves the token against the store's users, as caller.py does. A front that refuses
is the answer: nothing is printed, and the store is not read instead; the store is read only
to say the refusal in the words the store path would use (a persona the token lacks, a
revoked token), so the line does not depend on who answered. Without a note, the store is
opened and its fronts' heartbeat rows say where one listens. Without a front (or one that
cannot be reached), recall runs in this process on the store opened read-only (hook_store.py).
A session-start profile (hook_profile.py) always reads the store directly.

The parts: the arguments and stdin (hook_input.py), a front's client (hook_front.py), the
store and recall without a front (hook_store.py), the session-start profile (hook_profile.py);
this module runs one hook and says what it found, or why not, without failing the host.

Cold start: the hook modules import only the standard library at import time, and `aokun`'s
entry point (main.py) nothing else before a hook; everything heavier is imported by the path
that needs it, because a hook runs on every prompt.
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
from aokun_admin.hook_input import (
    PROFILE_BUDGET,
    PROMPT_BUDGET,
    HookParser,
    add_arguments,
    checked,
    read_hook_json,
    read_prompt,
)
from aokun_admin.hook_store import front_url, open_existing, own_check, readable_personas, recall_here

CLAUDE_EVENT_NAMES = {"prompt": "UserPromptSubmit", "session-start": "SessionStart"}
PROMPT_HEADER = "Possibly relevant memories (Aokun; [id · relevance 0-1], best first):"
PROFILE_HEADER = "What Aokun remembers about the user:"
SECTIONS = (("pinned", "Pinned:"), ("plans", "Upcoming plans:"), ("preferences", "Preferences:"),
            ("others", "About other people:"))
MAX_PROMPT_CHARS = 100_000  # what the recall tool reads of a query


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
        parser = add_arguments(HookParser(prog="aokun hook", description=(__doc__ or "").split("\n\n")[0]))
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
    except BaseException as exc:  # a hook must never break its host
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

    checked(args)
    if args.event == "prompt":
        prompt = read_prompt(args)  # before the config: a host's stdin is read either way
        config = load_config(args.config)
        if not prompt.strip():
            return "", "nowhere (empty prompt)"
        return prompt_context(config, prompt, args)
    read_hook_json(args)
    config = load_config(args.config)
    from aokun_admin.hook_profile import profile
    from shared.store.face import location
    from shared.time_zone import user_zone

    services = open_existing(config)
    try:
        personas = readable_personas(config, services.store, args.persona)
        text = profile(services.store, personas, args.k or 5, args.budget or PROFILE_BUDGET, PROFILE_HEADER,
                       SECTIONS, user_zone(config.memory.time_zone))
    finally:
        services.close()
    return text, f"the store ({location(config.storage)})"


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
    services = open_existing(config)
    store = services.store
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
            hits, source = recall_here(services, prompt, k, personas, args.min_score, room)
    finally:
        services.close()
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


def _lines(hits) -> str:
    """The header and one line a memory; "" for none. Both recalls left out what scores
    below the floors and fitted the lines to the budget."""
    from shared.search import answer

    if not hits:
        return ""
    return "\n".join([PROMPT_HEADER, *(answer.line(h) for h in hits)])


if __name__ == "__main__":  # `python -m aokun_admin.hook prompt ...`: skips the admin CLI's imports
    sys.exit(main(sys.argv[1:]))
