"""One rule for what a memory may hold, one way to report a failure.

The memory service checks what it is given (shared/memory_rules.py), so the same input gets
the same answer from every entry point: the service itself, the MCP memorize tool, the panel's
edit and an `aokun import` row. Our own errors reach the caller as their one-line message;
anything else is a bug, logged with its traceback and answered as an internal error.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

import pytest

from aokun_panel.security import csrf_token
from aokun_server.reinforcer import Reinforcer
from aokun_server.server import AokunMCPServer
from aokun_server.tools import ToolDeps, register_tools, searching, writing
from helpers import aokun_in_process, db_rows, front_in_process, mcp_session, write_config
from panel_helpers import panel_in_process
from shared.assembly import open_services
from shared.config import ALL_TOOLS, load_config
from shared.errors import InvalidInput, MemoryNotFound
from shared.memory_rules import fields_from_metadata
from shared.store.model.documents import MemoryFields

LIMIT = 50
OVERSIZED = "x" * (LIMIT + 1)
REFUSED = f"content is {LIMIT + 1} characters; the limit is {LIMIT} (server.max_content_chars)"
# The time marker says when the memory happened: a field, not part of what is measured.
MARKED_AT_LIMIT = "[2024-05-08 13:56] " + "y" * LIMIT


@pytest.fixture
def config(tmp_path):
    return write_config(tmp_path, server={"max_content_chars": LIMIT, "exposed_tools": list(ALL_TOOLS)})


@pytest.fixture
def services(config):
    services = open_services(load_config(config), queued=False)
    yield services
    services.close()


def test_the_service_refuses_oversized_content_and_measures_without_the_marker(services):
    memories = services.memories
    with pytest.raises(InvalidInput) as refused:
        memories.memorize(OVERSIZED, MemoryFields())
    assert str(refused.value) == REFUSED
    doc = memories.memorize(MARKED_AT_LIMIT, MemoryFields())
    assert doc.text == MARKED_AT_LIMIT
    with pytest.raises(InvalidInput) as edit_refused:
        memories.edit(doc.id, OVERSIZED, {})
    assert str(edit_refused.value) == REFUSED
    with pytest.raises(InvalidInput, match="content is empty"):
        memories.memorize("  \n ", MemoryFields())


def test_the_service_checks_fields_ids_and_edits(services):
    memories = services.memories
    doc = memories.memorize("a plain memory", MemoryFields())
    cases = [
        (lambda: memories.memorize("t", MemoryFields(topics=("t" * 201,))),
         "topics[0]: must be at most 200 characters (got 201)"),
        (lambda: memories.memorize("t", MemoryFields(key_facts=("k",) * 65)),
         "key_facts: must have at most 64 items (got 65)"),
        (lambda: memories.memorize("t", MemoryFields(participants=(" ",))),
         "participants[0]: is an empty string"),
        (lambda: memories.memorize("t", MemoryFields(importance=1.5)), "importance: must be at most 1 (got 1.5)"),
        (lambda: memories.memorize("t", MemoryFields(importance=float("nan"))), "importance: must be a finite number"),
        (lambda: memories.memorize("t", MemoryFields(sentiment="angry")),
         'sentiment: must be one of positive, neutral, negative (got "angry")'),
        (lambda: memories.memorize("t", MemoryFields(persona_id="p" * 201)),
         "persona_id: must be at most 200 characters (got 201)"),
        (lambda: memories.memorize("bad \ud800 text", MemoryFields()),
         "content holds an invalid character at position 4"),
        (lambda: memories.edit(doc.id, None, {}), "nothing to change: give content and/or metadata"),
        (lambda: memories.edit(doc.id, None, {"source_hash": "x"}), "unknown field 'source_hash'"),
        (lambda: memories.edit(doc.id, None, {"importance": -1}), "importance: must be at least 0 (got -1)"),
        (lambda: memories.delete(True), "id: must be an integer (got true)"),
        (lambda: memories.set_pinned(0, True), "id: must be at least 1 (got 0)"),
        (lambda: memories.set_pinned(doc.id, "yes"), 'pinned: must be true or false (got "yes")'),
        (lambda: fields_from_metadata({"original_time": "yesterday"}), "original_time: must be an ISO-8601"),
        (lambda: fields_from_metadata({"tags": ["x"]}), "metadata: unknown key 'tags'"),
        # Year 10000 once the offset is applied: later date arithmetic (the atoms stage) fails.
        (lambda: memories.memorize("t", fields_from_metadata({"original_time": "9999-12-31T23:59:00-23:59"})),
         "original_time: 9999-12-31T23:59:00-23:59 is out of range: give a time in the years 1900 to 2200"),
        (lambda: memories.edit(doc.id, None, {"original_time": datetime(1, 1, 1, tzinfo=timezone.utc)}),
         "original_time: 0001-01-01T00:00:00+00:00 is out of range"),
        # The sane range: years 1900 to 2200, both ends included, in UTC.
        (lambda: memories.memorize("t", MemoryFields(original_time=datetime(9999, 12, 31))),
         "original_time: 9999-12-31T00:00:00 is out of range: give a time in the years 1900 to 2200 (UTC)"),
        (lambda: memories.memorize("t", MemoryFields(original_time=datetime(1899, 12, 31, 23, 59))),
         "original_time: 1899-12-31T23:59:00 is out of range"),
        (lambda: memories.memorize("t", fields_from_metadata({"original_time": "2201-01-01"})),
         "original_time: 2201-01-01T00:00:00 is out of range"),
        # A host's missing value sent as a word: refused as a persona or session, written or read.
        (lambda: memories.memorize("t", MemoryFields(persona_id="null")),
         'persona_id: "null" is the word for no value, not a name: leave the key out (or send JSON null) for none'),
        (lambda: memories.memorize("t", fields_from_metadata({"session_id": " None "})),
         'session_id: " None " is the word for no value'),
        (lambda: memories.edit(doc.id, None, {"persona_id": "NULL"}), 'persona_id: "NULL" is the word for no value'),
    ]
    for call, message in cases:
        with pytest.raises(InvalidInput) as refused:
            call()
        assert message in str(refused.value)
        assert "\n" not in str(refused.value)
    with pytest.raises(MemoryNotFound):
        memories.delete(doc.id + 1000)
    assert db_rows_count(services) == 1  # nothing refused was stored
    edited = memories.edit(doc.id, None, {"topics": (" gardening ",)})
    assert edited.fields.topics == ("gardening",)
    # The ends of the range are in it; a name that merely holds the word is a name.
    for when, persona in ((datetime(1900, 1, 1), "nullish"), (datetime(2200, 12, 31, 23, 59), "none-of-them")):
        kept = memories.memorize("at an end of the range", MemoryFields(original_time=when, persona_id=persona))
        # Without an offset, a time is read on the user's clock (memory.time_zone).
        assert (kept.fields.original_time, kept.fields.persona_id) == (when.replace(tzinfo=memories.zone()), persona)


def db_rows_count(services) -> int:
    return services.store.documents.count()


def test_every_entry_point_refuses_oversized_content_with_the_same_message(config, services, tmp_path):
    with pytest.raises(InvalidInput) as direct:
        services.memories.memorize(OVERSIZED, MemoryFields())
    target = services.memories.memorize("a memory to edit", MemoryFields()).id

    with front_in_process(config) as s:
        by_tool = s.error("memorize", {"content": OVERSIZED})
        assert s.error("edit_memory", {"id": target, "content": OVERSIZED}) == REFUSED
        assert s.ok("memorize", {"content": MARKED_AT_LIMIT})["text"] == MARKED_AT_LIMIT

    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps({"text": t}) for t in (OVERSIZED, MARKED_AT_LIMIT)) + "\n",
                    encoding="utf-8")
    imported = aokun_in_process("import", rows, "--config", config)
    assert imported.returncode == 1, imported.stdout + imported.stderr
    [by_import] = imported.stderr.strip().splitlines()
    assert "imported 1, already present 0, skipped 1" in imported.stdout

    with panel_in_process(config) as (panel, url, token):
        answer = panel.post(f"/api/memories/{target}", json={"content": OVERSIZED},
                            headers={"Origin": url, "X-CSRF-Token": csrf_token(token)})
    assert answer.status_code == 400

    assert str(direct.value) == REFUSED
    assert by_tool == REFUSED
    assert by_import == f"aokun import: rows.jsonl line 1: {REFUSED}; skipped"
    assert answer.json() == {"error": REFUSED}
    [(kept,)] = db_rows(config, "SELECT text FROM documents WHERE id = ?", (target,))
    assert kept.endswith("] a memory to edit")


def test_every_entry_point_refuses_a_date_outside_the_years_1900_to_2200(config, services, tmp_path):
    """The tool, an import row, a transcript given to ingest and the panel's edit: each one line."""
    out_of_range = "9999-12-31T00:00:00 is out of range: give a time in the years 1900 to 2200 (UTC)"
    target = services.memories.memorize("a memory to edit", MemoryFields()).id
    with front_in_process(config) as s:
        assert s.error("memorize", {"content": "x", "metadata": {"original_time": "9999-12-31"}}) == \
            f"original_time: {out_of_range}"

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"text": "x", "original_time": "9999-12-31"}) + "\n", encoding="utf-8")
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text(json.dumps({"speaker": "Ann", "text": "see you tomorrow", "time": "9999-12-31"}) + "\n",
                          encoding="utf-8")
    refused = {}
    for command, path, status in (("import", rows, 1), ("ingest", transcript, 2)):  # ingest: bad input
        done = aokun_in_process(command, path, "--config", config)
        assert done.returncode == status, done.stdout + done.stderr
        [refused[command]] = done.stderr.strip().splitlines()
    assert refused["import"] == f"aokun import: rows.jsonl line 1: original_time: {out_of_range}; skipped"
    assert refused["ingest"] == f"aokun ingest: {transcript}: turn 1's time: {out_of_range}"

    with panel_in_process(config) as (panel, url, token):
        answer = panel.post(f"/api/memories/{target}", json={"metadata": {"original_time": "9999-12-31"}},
                            headers={"Origin": url, "X-CSRF-Token": csrf_token(token)})
    assert (answer.status_code, answer.json()) == (400, {"error": f"original_time: {out_of_range}"})
    assert db_rows(config, "SELECT COUNT(*), COUNT(original_time) FROM documents") == [(1, 0)]


class BrokenRecaller:
    """A recaller that fails the way a bug does (no AokunError)."""

    def recall(self, request):
        raise KeyError("channel 'bm25' missing from the fused ranking")


@pytest.fixture
def deps(services):
    memories = services.memories
    deps = ToolDeps(memories=memories, recaller=BrokenRecaller(), index=None,
                    reinforcer=Reinforcer(memories, services.live), atom_search=services.atom_search,
                    lifecycle=services.lifecycle, reconcile_queue=dict, live=services.live,
                    summarizer=services.summarizer)
    return deps


def test_a_bug_in_a_tool_is_an_internal_error_and_is_logged(deps, caplog):
    server = AokunMCPServer("broken", exposed_tools=tuple(ALL_TOOLS))
    register_tools(server, deps)
    caplog.set_level(logging.ERROR)
    with mcp_session(server) as s:
        message = s.error("recall", {"query": "lighthouse"})
        # Our own errors still read as themselves, through the same server.
        assert s.error("memorize", {"content": OVERSIZED}) == REFUSED
        assert s.error("delete_memory", {"id": 4242}) == "no memory with id 4242"
    assert message == "recall failed: internal error (KeyError); see the server log"
    assert "bm25" not in message  # the bug's text stays in the log
    logged = [r for r in caplog.records if r.exc_info and "recall" in r.getMessage()]
    assert logged, [r.getMessage() for r in caplog.records]
    assert "channel 'bm25' missing" in logging.Formatter().formatException(logged[0].exc_info)


def test_a_tool_can_be_called_alone(deps):
    """Each tool is a plain function of its dependencies and arguments."""
    receipt = writing.memorize(deps, "tested alone, without a server")
    assert receipt.status == "accepted" and receipt.text.endswith("tested alone, without a server")
    listed = searching.list_memories(deps)
    assert [m.id for m in listed.memories] == [receipt.id] and listed.total == 1
    with pytest.raises(InvalidInput, match="query is empty"):
        searching.recall(deps, "   ")
    with pytest.raises(KeyError):  # no translation here: that is the server's
        searching.recall(deps, "tested")
