"""Arguments are checked one way for every tool, through the official MCP client: unknown
arguments are refused by name, numeric strings are read as numbers (booleans are not), one rule
for k above the maximum, and the schemas carry the real limits and a description for every
parameter."""

from __future__ import annotations

import pytest

from helpers import front_in_process, write_config
from shared.config import ALL_TOOLS

RECALL_TAKES = ("query, k, session_id, persona_id, include_archived, since, until, explain, "
                "min_score, max_chars, happens_after, happens_before")


def bounds(schema: dict) -> tuple:
    """(minimum, maximum) of a property, on it or on its non-null anyOf branch."""
    for branch in [schema, *schema.get("anyOf", ())]:
        if "minimum" in branch:
            return branch["minimum"], branch.get("maximum")
    return None, None


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server with every tool listed; recall_max_k 15 (the default)."""
    config = write_config(tmp_path_factory.mktemp("arguments"),
                          server={"exposed_tools": list(ALL_TOOLS)})
    with front_in_process(config) as session:
        for i in range(20):
            session.ok("memorize", {"content": f"note {i} about the garden"})
        yield session


def test_an_unknown_argument_is_refused_by_name(server):
    assert server.error("recall", {"query": "garden", "persona": "me"}) == \
        f'unknown argument "persona" (recall takes: {RECALL_TAKES})'
    message = server.error("search_atoms", {"query": "garden", "kk": 3, "typ": ["planned"]})
    assert message.startswith('unknown arguments "kk", "typ" (search_atoms takes: query, k, ')
    assert server.error("memory_stats", {"verbose": True}) == \
        'unknown argument "verbose" (memory_stats takes: no arguments)'
    # Nested objects keep their own rule: an unknown metadata key names the accepted keys.
    assert "metadata.colour: is not an accepted key" in server.error(
        "memorize", {"content": "x", "metadata": {"colour": "red"}})


def test_every_tool_refuses_an_unknown_argument(server):
    for name in ALL_TOOLS:
        message = server.error(name, {"no_such_argument": 1})
        assert message.startswith(f'unknown argument "no_such_argument" ({name} takes: '), message


def test_numeric_strings_are_read_as_numbers(server):
    assert len(server.ok("recall", {"query": "garden", "k": "3", "min_score": "0"})["results"]) == 3
    listed = server.ok("list_memories", {"limit": "2", "offset": "1"})
    assert (listed["limit"], listed["offset"], len(listed["memories"])) == (2, 1, 2)
    assert server.ok("pin_memory", {"id": "1"}) == {"id": 1, "pinned": True}
    hits = server.ok("recall", {"query": "garden", "k": "2", "min_score": "0.0"})["results"]
    assert len(hits) == 2


def test_booleans_and_non_numbers_are_not_numbers(server):
    assert server.error("recall", {"query": "garden", "k": True}) == "k: must be an integer (got true)"
    assert server.error("recall", {"query": "garden", "k": "true"}) == 'k: must be an integer (got "true")'
    assert server.error("recall", {"query": "garden", "k": "2.5"}) == 'k: must be an integer (got "2.5")'
    assert server.error("recall", {"query": "garden", "min_score": "high"}) == \
        'min_score: must be a number (got "high")'
    assert server.error("recall", {"query": "garden", "min_score": False}) == \
        "min_score: must be a number (got false)"
    assert server.error("recall", {"query": "garden", "min_score": "1.5"}) == \
        "min_score: must be at most 1 (got 1.5)"
    assert server.error("delete_memory", {"id": "1e3"}) == 'id: must be an integer (got "1e3")'


def test_k_above_the_maximum_is_refused_the_same_way_by_every_tool_that_takes_k(server):
    for name, arguments in (("recall", {"query": "garden"}), ("search_atoms", {"query": "garden"})):
        for k in (16, "16", 10**30, 0, -1):
            got = int(k) if isinstance(k, str) else k
            assert server.error(name, {**arguments, "k": k}) == \
                f"k: must be between 1 and 15 (got {got})", (name, k)
    assert len(server.ok("recall", {"query": "garden", "k": 15, "min_score": 0})["results"]) == 15


def test_k_follows_the_live_maximum(tmp_path):
    config = write_config(tmp_path, memory={"recall_max_k": 3, "recall_top_k": 2},
                          server={"exposed_tools": ["recall", "search_atoms"]})
    with front_in_process(config) as s:
        assert s.error("recall", {"query": "x", "k": 4}) == "k: must be between 1 and 3 (got 4)"
        assert s.error("search_atoms", {"query": "x", "k": 4}) == "k: must be between 1 and 3 (got 4)"
        tools = {t.name: t for t in s._portal.call(s.client.list_tools).tools}
    for name in ("recall", "search_atoms"):
        assert bounds(tools[name].input_schema["properties"]["k"]) == (1, 3)


def test_schemas_describe_every_parameter_and_show_real_limits(server):
    tools = server._portal.call(server.client.list_tools).tools
    assert sorted(t.name for t in tools) == sorted(ALL_TOOLS)
    for t in tools:
        for name, schema in t.input_schema.get("properties", {}).items():
            description = schema.get("description", "")
            assert description and "\n" not in description, (t.name, name)
        assert "9223372036854775807" not in str(t.input_schema), t.name
    recall = next(t for t in tools if t.name == "recall").input_schema["properties"]
    assert bounds(recall["k"]) == (1, 15)
    assert "ISO-8601" in recall["since"]["description"] and "UTC" in recall["since"]["description"]
    assert "persona" in recall["persona_id"]["description"]
    assert bounds(recall["min_score"]) == (0, 1)
    assert bounds(recall["max_chars"]) == (100, 1_000_000)


def test_ids_beyond_64_bits_are_still_refused(server):
    big = 2**63
    assert server.error("delete_memory", {"id": big}) == \
        f"id: must be at most {big - 1} (got {big})"
    assert server.error("list_memories", {"offset": str(big)}) == \
        f"offset: must be at most {big - 1} (got {big})"
