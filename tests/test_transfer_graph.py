"""Imported memories through the worker's stages (run in this process): the MCP memory server's relations and a Markdown
folder's tags and people become the expected graph facts, and an export carries the atoms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import all_processed, aokun_in_process, db_rows, last_line, run_every_stage, write_config

DATA = Path(__file__).parent / "data" / "transfer"


@pytest.fixture
def system(tmp_path):
    """A config on a fake embeddings API."""
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(tmp_path, embedding={"provider": "openai", "base_url": api.base_url,
                                                   "model": "fake", "dimensions": 32},
                              queue={"retry_base_s": 0.2})
        yield config


def settle(config: Path, count: int) -> None:
    """What a worker does with the imported memories, done here: then `count` are processed."""
    run_every_stage(config)
    assert all_processed(config, count)


def edges(config: Path, persona: str) -> set[tuple[str, str, str]]:
    """(source node, edge type, target node) by canonical form, in one persona's graph."""
    return set(db_rows(config, "SELECT s.canonical, e.type, d.canonical FROM graph_edges e"
                               " JOIN graph_nodes s ON s.id = e.src_node_id"
                               " JOIN graph_nodes d ON d.id = e.dst_node_id WHERE s.persona_id = ?",
                       (persona,)))


def nodes(config: Path, persona: str) -> set[tuple[str, str]]:
    return set(db_rows(config, "SELECT type, canonical FROM graph_nodes WHERE persona_id = ?", (persona,)))


def linked(found: set, a: str, b: str) -> bool:
    return (a, "co_occurs_with", b) in found or (b, "co_occurs_with", a) in found


@pytest.mark.slow
def test_mcp_memory_relations_become_graph_facts(system, tmp_path):
    config = system
    last_line(aokun_in_process("import", DATA / "memory.jsonl", "--persona", "me", "--config", config))
    settle(config, 6)
    graph = nodes(config, "me")
    # The MCP memory server's entity types are kept: Anthropic is an organisation, Kyoto a place.
    assert {("person", "john_smith"), ("organisation", "anthropic"), ("person", "maria_garcia")} <= graph
    assert ("person", "anthropic") not in graph
    found = edges(config, "me")
    for fact, source, target in (("john_smith works at anthropic", "john_smith", "anthropic"),
                                 ("maria_garcia mentors john_smith", "maria_garcia", "john_smith")):
        # The relation is a fact node that both entities describe, and the entities are linked.
        assert ("fact", fact) in graph
        assert (source, "describes", fact) in found and (target, "describes", fact) in found
        assert linked(found, source, target)
    # "works at" is also a typed relation between the two entities.
    assert ("john_smith", "relation", "anthropic") in found
    # An entity's observations and its relations meet at its one node.
    assert ("john_smith", "describes", "john_smith: speaks fluent spanish") in found
    assert ("person", "organization") not in graph and ("topic", "organization") in graph
    john_facts = {dst for src, kind, dst in found if src == "john_smith" and kind == "describes"}
    assert {"john_smith: speaks fluent spanish", "john_smith: graduated in 2019",
            "john_smith works at anthropic", "maria_garcia mentors john_smith"} <= john_facts
    entries = [t for (t,) in db_rows(config, "SELECT text FROM graph_entries")]
    assert any(t.startswith("Fact: John_Smith works at Anthropic Summary:") for t in entries)

    # The export carries each memory's atoms, in JSONL and in Markdown.
    exported = tmp_path / "with-atoms.jsonl"
    last_line(aokun_in_process("export", "--atoms", exported, "--config", config))
    records = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()[1:]]
    assert len(records) == 6 and all(r["atoms"] and r["atoms"][0]["state"] == "active" for r in records)
    relation = next(r for r in records if r["text"].endswith("John_Smith works at Anthropic"))
    assert [a["text"] for a in relation["atoms"]] == ["John_Smith works at Anthropic"]
    folder = tmp_path / "md"
    last_line(aokun_in_process("export", "--format", "markdown", "--atoms", folder, "--config", config))
    page = (folder / "me.md").read_text(encoding="utf-8")
    assert "- atoms:\n  - John_Smith works at Anthropic (" in page


@pytest.mark.slow
def test_markdown_tags_and_people_become_graph_nodes(system):
    config = system
    result = aokun_in_process("import", DATA / "notes", "--config", config)
    assert "imported 8," in result.stdout
    settle(config, 8)
    graph = nodes(config, "")
    assert {("topic", "travel"), ("topic", "japan"), ("topic", "friends"), ("topic", "climbing"),
            ("person", "alice")} <= graph
    found = edges(config, "")
    food = [dst for src, kind, dst in found if src == "alice" and kind == "describes" and "tofu kaiseki" in dst]
    assert food, "the Food section's facts are described by Alice, a participant of the note"
    assert linked(found, "alice", "climbing") and linked(found, "travel", "japan")
