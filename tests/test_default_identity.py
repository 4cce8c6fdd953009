"""One identity by default: a user who never names a persona finds everything in one place.

The model's own memorize calls (the official MCP client, the real front built in this
process), `aokun ingest` of a session (the real CLI's main(), in this process) and `aokun
hook prompt` / `session-start` wired as the README wires them (no --persona) meet in
memory.default_persona, and the panel's graph (its app, in this process) opens on it; a persona named explicitly still
isolates, on writes and on reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import (
    all_processed,
    aokun_as_a_host,
    db_rows,
    front_in_process,
    run_every_stage,
    write_config,
)
from panel_helpers import panel_in_process

PEANUTS = "My daughter Mia is allergic to peanuts"
BUDGET = "The quarterly budget review with Hendricks is in the big meeting room"
SESSION = """Me: I'm flying to Lisbon next Friday for the design conference.
Assistant: Have a good trip to Lisbon!
Me: I always take the window seat on planes.
"""


def ingested(config: Path, folder: Path, *persona: str) -> int:
    transcript = folder / "session.txt"
    transcript.write_text(SESSION, encoding="utf-8")
    done = aokun_as_a_host(config, "ingest", str(transcript), *persona)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])  # the id, or "already stored as N"


def persona_of(config: Path, memory_id: int) -> str | None:
    return db_rows(config, "SELECT persona_id FROM documents WHERE id = ?", (memory_id,))[0][0]


@pytest.mark.slow
def test_mcp_ingest_hooks_and_the_graph_share_the_default_identity(tmp_path):
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(tmp_path, embedding={"provider": "openai", "base_url": api.base_url,
                                                   "model": "fake", "dimensions": 32})
        with front_in_process(config) as model:
            peanuts = model.ok("memorize", {"content": PEANUTS, "metadata": {"pinned": True}})
            budget = model.ok("memorize", {"content": BUDGET, "metadata": {"persona_id": "work"}})
        session = ingested(config, tmp_path)
        assert persona_of(config, peanuts["id"]) is None and persona_of(config, session) is None
        assert persona_of(config, budget["id"]) == "work"
        run_every_stage(config)
        assert all_processed(config, 3)

        prompt = aokun_as_a_host(config, "hook", "prompt", "peanuts Lisbon trip", "--min-score", "0", "--k", "10")
        assert prompt.returncode == 0 and prompt.stderr == "", prompt.stderr
        assert PEANUTS in prompt.stdout and "Lisbon" in prompt.stdout, prompt.stdout
        start = aokun_as_a_host(config, "hook", "session-start")
        assert start.returncode == 0 and start.stderr == "", start.stderr
        assert PEANUTS in start.stdout and "Lisbon" in start.stdout, start.stdout

        # A persona named explicitly isolates: only its own memories, and none of the default's.
        work = aokun_as_a_host(config, "hook", "prompt", "peanuts Lisbon budget review", "--persona", "work",
                     "--min-score", "0", "--k", "10")
        assert "Hendricks" in work.stdout and "peanuts" not in work.stdout and "Lisbon" not in work.stdout
        assert aokun_as_a_host(config, "hook", "session-start", "--persona", "work").stdout == ""

        with panel_in_process(config) as (client, _, _):
            page = client.get("/graph")
            assert page.status_code == 200
            assert '<option value="" selected>' in page.text, "the graph opens on the default identity"
            drawn = client.get("/api/graph", params={"persona": ""}).json()
            work_graph = client.get("/api/graph", params={"persona": "work"}).json()
        labels = {node["label"] for node in drawn["nodes"]}
        assert {"Mia", "Lisbon"} <= labels, labels
        assert "Hendricks" not in labels
        assert "Hendricks" in {node["label"] for node in work_graph["nodes"]}


def test_a_named_default_persona_is_where_unnamed_writes_go(tmp_path):
    config = write_config(tmp_path, memory={"default_persona": "me"},
                          server={"exposed_tools": ["memorize", "summarize_memory", "recall"]})
    with front_in_process(config) as model:
        assert model.ok("memorize", {"content": PEANUTS})["persona_id"] == "me"
        stored = model.ok("summarize_memory", {"conversation": SESSION, "store": True})
        assert stored["persona_id"] == "me"
        assert model.ok("memorize", {"content": BUDGET, "metadata": {"persona_id": "work"}})["persona_id"] == "work"
    session = ingested(config, tmp_path)
    assert persona_of(config, session) == "me"
    assert persona_of(config, ingested(config, tmp_path, "--persona", "work")) == "work"
    # Without --persona the hook reads every persona, the default among them; naming one keeps to it.
    both = aokun_as_a_host(config, "hook", "prompt", "peanuts Hendricks", "--min-score", "0")
    assert "Mia" in both.stdout and "Hendricks" in both.stdout, both.stdout + both.stderr
    mine = aokun_as_a_host(config, "hook", "prompt", "peanuts Hendricks", "--persona", "me", "--min-score", "0")
    assert "Mia" in mine.stdout and "Hendricks" not in mine.stdout, mine.stdout + mine.stderr


def test_a_default_persona_that_is_no_name_is_refused_in_one_line(tmp_path):
    config = write_config(tmp_path, memory={"default_persona": "  me "})
    done = aokun_as_a_host(config, "stats")
    assert done.returncode == 2
    assert "memory.default_persona must be a persona name" in done.stderr, done.stderr
