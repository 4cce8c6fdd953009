"""What a host gives `aokun hook`: its arguments, and on stdin the hook's JSON (its fields:
hook.py) or, with --plain, the prompt's text.

Arguments are parsed by a parser that raises HookError where argparse would exit 2 (a status
Claude Code reads as "refuse the user's prompt"). Standard library only at import time, as
for every hook module.
"""

from __future__ import annotations

import argparse
import json
import sys

from aokun_admin.hook_front import HookError

EVENTS = ("prompt", "session-start")
PROMPT_BUDGET = 2000
PROFILE_BUDGET = 1200


class HookParser(argparse.ArgumentParser):
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


def checked(args) -> None:
    """HookError for numbers out of range (argparse checks only their type)."""
    if args.budget is not None and args.budget < 1:
        raise HookError(f"--budget must be at least 1, got {args.budget}")
    if args.k is not None and args.k < 1:
        raise HookError(f"--k must be at least 1, got {args.k}")
    if args.min_score is not None and not 0.0 <= args.min_score <= 1.0:
        raise HookError(f"--min-score must be between 0 and 1, got {args.min_score}")


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
