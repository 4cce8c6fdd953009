"""`aokun ingest`: a transcript file summarized and memorized once. Hosts that can run a command
at the end of a session (Claude Code's SessionEnd and PreCompact hooks) call
`aokun ingest --from-hook`, which reads the hook's JSON on stdin. The readers and how a
summarized conversation becomes memorize's fields are shared/summarize/transcripts.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aokun_admin.caller import caller
from shared.access import memorize_persona
from shared.errors import InvalidInput
from shared.summarize.transcript_lines import to_summarize
from shared.summarize.transcripts import FORMATS, dated, hook_input, memory_fields, modified_time, read_transcript
from shared.time_zone import user_zone

# A progress bar for files this large, when stderr is a terminal (a hook's is not).
PROGRESS_BYTES = 8 * 1024 * 1024

# -- the command ----------------------------------------------------------------------------


def ingest_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, nargs="?",
                        help='a "Name: text" transcript, JSON turns, or a Claude Code session JSONL')
    parser.add_argument("--from-hook", action="store_true",
                        help="read the transcript path (and session id) from a host hook's JSON on stdin")
    parser.add_argument("--persona", help="persona_id of the memory (default: memory.default_persona, "
                                           "or a user token's one persona)")
    parser.add_argument("--session", help="session_id of the memory (with --from-hook, default: the hook's)")
    parser.add_argument("--format", choices=FORMATS, default="auto",
                        help="jsonl: JSON turns or Claude Code JSONL; text: Name: text lines (default: auto)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the structured memory as JSON and store nothing")


def cmd_ingest(admin, args) -> int:
    """Summarize a transcript with the configured provider and memorize it once; the memory
    id (or "already stored as N") is the last line printed."""
    path, session = args.file, args.session
    if args.from_hook == (path is not None):
        raise InvalidInput("give either a transcript FILE or --from-hook (the hook's JSON on stdin)")
    if args.from_hook:
        hook = hook_input(sys.stdin.read())
        path = Path(hook["transcript_path"]).expanduser()
        session = session or hook.get("session_id") or None
    turns = dated(_read(path, args.format), modified_time(path), user_zone(admin.config.memory.time_zone))
    if not turns:
        if args.from_hook:
            print(f"nothing to remember: {path} holds no conversation yet")
            return 0
        raise InvalidInput(f"{path} holds no conversation: no turn has any text")
    summarized, limited = to_summarize(turns)
    for warning in limited:
        print(f"aokun ingest: {warning}", file=sys.stderr)
    memory = admin.services.summarizer.summarize(summarized)
    for warning in memory.warnings:
        print(f"aokun ingest: {warning}", file=sys.stderr)
    service = admin.memories(queued=not args.dry_run)  # a dry run opens no queue
    persona = ingest_persona(admin, args.persona)
    # The service's own rule, a dry run included: what it prints could be stored.
    summary, fields = service.checked(memory.summary, memory_fields(memory, turns, persona, session))
    if args.dry_run:
        print(memory.model_dump_json(indent=2))
        return 0
    doc, created = service.memorize_once(summary, fields)
    if not created:
        print(f"already stored as {doc.id}")
        return 0
    print(f"stored {len(turns)} turns as one memory ({memory.provider}, {len(memory.key_facts)} key facts)")
    print(doc.id)
    return 0


def ingest_persona(admin, persona: str | None) -> str | None:
    """Whose the memory is, as memorize decides it for the caller (aokun_admin/caller.py, as
    `aokun hook` reads): --persona if the caller holds it, else memory.default_persona, else a
    user's one persona; so a hook wired without --persona stores where the model's own
    memorize calls and the prompt hook look."""
    principal = caller(admin.store, admin.config)
    return memorize_persona(principal, persona, admin.config.memory.default_persona_id)


def _read(path: Path, fmt: str):
    """read_transcript, its warnings on stderr, with a progress bar for a large file read
    at a terminal."""
    def warn(message: str) -> None:
        print(f"aokun ingest: {message}", file=sys.stderr)

    try:
        large = path.stat().st_size >= PROGRESS_BYTES and sys.stderr.isatty()
    except OSError:
        large = False  # reading it will say what is wrong
    if not large:
        return read_transcript(path, fmt, warn)
    from tqdm import tqdm

    with tqdm(total=path.stat().st_size, unit="B", unit_scale=True, file=sys.stderr,
              desc="reading", leave=False) as bar:
        return read_transcript(path, fmt, lambda m: bar.write(f"aokun ingest: {m}", file=sys.stderr),
                               bar.update)
