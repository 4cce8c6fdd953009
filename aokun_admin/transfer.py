"""`aokun export` and `aokun import`: your memories in and out (shared/transfer/). A chat
export (ChatGPT's or Claude's conversations.json) is imported by aokun_admin/chat_import.py.

Imports write through the memory service, each row checked by the service's rules — the same
as memorize's, the panel's and ingest's (shared/memory_rules.py) — and are queued for the
workers like every CLI write.

An export is the admin's (the CLI holds the config's store credentials), unless it names a
user's token (--token, else AOKUN_TOKEN): then it holds only that user's personas, by the same
rules as the tools' (shared/access.py), so a user's script can take its own memories out.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from aokun_admin.caller import token_principal
from aokun_admin.chat_import import cmd_import_chats
from aokun_admin.import_end import QueueAsYouGo, finish_import
from shared.access import ADMIN, Principal, read_personas
from shared.config import LOCAL_TOKEN_ENV
from shared.errors import AokunError, InvalidInput
from shared.transfer import chats
from shared.transfer.export import export_jsonl, export_markdown
from shared.transfer.importer import Importer
from shared.transfer.sources import detect_format, read_rows

EXPORT_FORMATS = ("jsonl", "markdown")
IMPORT_FORMATS = ("auto", "jsonl", "mcp-memory", "markdown", *chats.FORMATS)


def add_parsers(commands, with_config) -> None:
    """The export and import subcommands, on the admin CLI's subparsers."""
    export = with_config(commands.add_parser(
        "export", help="write every memory (with metadata and times) to JSONL or Markdown"))
    export.add_argument("file", type=Path, help="the JSONL file, or the folder for --format markdown")
    export.add_argument("--persona", help="only this persona's memories")
    export.add_argument("--format", choices=EXPORT_FORMATS, default="jsonl",
                        help="jsonl: one memory a line, re-importable (default); "
                              "markdown: one readable file per persona")
    export.add_argument("--atoms", action="store_true", help="add each memory's atoms")
    export.add_argument("--token", help=f"export as this user's token: its personas only "
                                        f"(default: ${LOCAL_TOKEN_ENV}; without either, every persona)")
    imported = with_config(commands.add_parser(
        "import", help="memorize an export, an MCP memory.jsonl, a folder of Markdown notes or a ChatGPT or "
                       "Claude conversations.json, each row (conversation) once"))
    imported.add_argument("file", type=Path, help="the file, or a folder of Markdown notes")
    imported.add_argument("--format", choices=IMPORT_FORMATS, default="auto",
                          help="jsonl: an Aokun export; mcp-memory: the MCP memory server's memory.jsonl; "
                               "markdown: notes; chatgpt, claude: their conversations.json (default: auto)")
    imported.add_argument("--persona", help="persona_id of every imported memory (default: each row's own; "
                                            "for conversations, memory.default_persona)")
    imported.add_argument("--progress", action="store_true",
                          help="show the progress bar even when stderr is not a terminal")


def cmd_export(admin, args) -> int:
    principal = exporting_principal(admin, args.token if args.token is not None else os.environ.get(LOCAL_TOKEN_ENV))
    # The admin's export covers persona_id, or everything; a user's covers the
    # personas its token holds, or the one it names if held.
    scopes = None if principal.admin else read_personas(principal, args.persona)
    if args.format == "jsonl":
        count = export_jsonl(admin.store, args.file, args.persona, args.atoms, time.time(), scopes)
        print(f"exported {count} memories to {args.file}")
        return 0
    counts = export_markdown(admin.store, args.file, args.persona, args.atoms, time.time(), scopes)
    print(f"exported {sum(counts.values())} memories of {len(counts)} persona(s) to {args.file}")
    return 0


def exporting_principal(admin, token: str | None) -> Principal:
    """Whose export this is: the admin without a token, else the token's principal, looked up
    now (a user's token is that user's even where it is server.token too); an unknown or
    revoked token stops the export (never falls back to the admin)."""
    if token is None:
        return ADMIN
    return token_principal(admin.store, token, f"--token / {LOCAL_TOKEN_ENV}", admin.config.server.token)


def cmd_import(admin, args) -> int:
    """Import every row once; bad rows are reported one line each on stderr and skipped.
    Exit 1 when rows were skipped, 0 otherwise; the summary line is printed either way."""
    from tqdm import tqdm

    if args.persona is not None and not args.persona.strip():
        raise InvalidInput("--persona is empty: give a persona id, or leave it out to keep each row's own")
    fmt = detect_format(args.file) if args.format == "auto" else args.format
    if fmt in chats.FORMATS:
        if not args.file.is_file():
            raise InvalidInput(f"{args.file} not found: give the conversations.json to import" if not
                               args.file.exists() else f"{args.file} is a folder: give its conversations.json")
        return cmd_import_chats(admin, args, fmt)
    bar = tqdm(unit="row", file=sys.stderr, disable=not (args.progress or sys.stderr.isatty()))
    progress = Progress(bar, args.file.stat().st_size if fmt != "markdown" and args.file.is_file() else None)
    try:
        rows = read_rows(args.file, fmt, progress.read)
    except AokunError:
        bar.close()
        raise
    # Stages are queued every few seconds and at the end, not row by row: measured, queueing
    # each row halved the rows imported per second (110-160 instead of 190-360 on two busy
    # cores). A row committed but not queued (the import killed) waits for the reconciler.
    service = admin.memories(queued=False)
    queueing = QueueAsYouGo(admin)

    def report(where: str, problem: str) -> None:
        tqdm.write(f"aokun import: {where}: {problem}; skipped", file=sys.stderr)

    importer = Importer(service, report, persona_id=args.persona,
                        lookup=lambda i: admin.store.documents.get_many([i]).get(i))
    try:
        with bar:
            counts = importer.run(rows, lambda count: (progress.row(count), queueing.tick()))
            progress.done()
    except AokunError:
        print(f"{importer.counts.summary()} before stopping; run the import again to continue "
              "(rows already imported are not imported twice)")
        raise
    total = counts.imported + counts.present + counts.skipped
    finish_import(admin, counts.imported)
    print(f"{counts.summary()} ({total} rows, {fmt}, from {args.file})")
    return 1 if counts.skipped else 0


class Progress:
    """Rows imported, of a total estimated from the bytes read so far (a file is read a line
    at a time, never counted first); the total is known once the last row is in."""

    def __init__(self, bar, size: int | None):
        self.bar, self.size, self.bytes_read = bar, size, 0

    def read(self, count: int) -> None:
        self.bytes_read += count

    def row(self, count: int) -> None:
        self.bar.update(count)
        if self.size and self.bytes_read:
            self.bar.total = max(self.bar.n, round(self.bar.n * self.size / self.bytes_read))

    def done(self) -> None:
        self.bar.total = self.bar.n
        self.bar.refresh()
