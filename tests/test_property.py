"""Random tool calls to the real front (built in this process): no crash, no corruption, nothing lost."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import db_rows, front_in_process, write_config

TOOLS = ["memorize", "recall", "list_memories", "edit_memory", "delete_memory", "pin_memory",
         "memory_stats"]
META_KEYS = ["topics", "participants", "key_facts", "sentiment", "importance", "pinned",
             "session_id", "persona_id", "original_time", "persona_summary", "bogus"]

anything = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6)
texts = st.text(max_size=200) | st.sampled_from(["花生过敏", "peanut", '"NEAR(', "*", "  ", "喜欢 tea"])
metadata_values = {
    "topics": st.lists(st.text(max_size=10), max_size=3) | anything,
    "participants": st.lists(st.text(max_size=10), max_size=3),
    "key_facts": st.lists(st.text(max_size=20), max_size=2),
    "sentiment": st.sampled_from(["positive", "neutral", "negative", "meh"]),
    "importance": st.floats(-1, 2, allow_nan=False) | anything,
    "pinned": st.booleans() | anything,
    "session_id": st.text(max_size=5) | st.none(),
    "persona_id": st.sampled_from(["a", "b", ""]) | st.none(),
    "original_time": st.sampled_from(["2024-01-02", "2024-01-02T03:04:05+08:00", "yesterday"]),
    "persona_summary": st.text(max_size=30) | st.none(),
    "bogus": anything,
}
valid_metadata = st.fixed_dictionaries({}, optional={
    "topics": st.lists(st.text(min_size=1, max_size=10), max_size=3),
    "importance": st.floats(0, 1),
    "pinned": st.booleans(),
    "persona_id": st.sampled_from(["a", "b"]),
    "session_id": st.sampled_from(["s1", "s2"]),
    "original_time": st.sampled_from(["2024-01-02", "2024-01-02T03:04:05+08:00"]),
    "sentiment": st.sampled_from(["positive", "neutral", "negative"]),
})
metadata = valid_metadata | st.fixed_dictionaries({}, optional=metadata_values) | anything
ids = st.integers(0, 60)
# Mostly plausible calls, so memories pile up and edits and deletes hit them, plus noise.
plausible = st.one_of(
    st.tuples(st.just("memorize"), st.fixed_dictionaries({"content": texts}, optional={"metadata": valid_metadata})),
    st.tuples(st.just("memorize"), st.fixed_dictionaries({"content": texts}, optional={"metadata": valid_metadata})),
    st.tuples(st.just("recall"), st.fixed_dictionaries({"query": texts}, optional={
        "k": st.integers(1, 20), "persona_id": st.sampled_from(["a", "b"]), "include_archived": st.booleans()})),
    st.tuples(st.just("edit_memory"), st.fixed_dictionaries({"id": ids}, optional={
        "content": texts, "metadata": valid_metadata})),
    st.tuples(st.just("delete_memory"), st.fixed_dictionaries({"id": ids})),
    st.tuples(st.just("pin_memory"), st.fixed_dictionaries({"id": ids, "pinned": st.booleans()})),
    st.tuples(st.just("list_memories"), st.fixed_dictionaries({}, optional={
        "limit": st.integers(-1, 300), "offset": st.integers(-1, 50), "persona_id": st.sampled_from(["a", "b"])})),
)
noise = st.tuples(st.sampled_from(TOOLS), st.fixed_dictionaries({}, optional={
    "content": texts | anything, "query": texts | anything, "metadata": metadata,
    "id": ids | anything, "k": st.integers(-2, 30) | anything,
    "limit": st.integers(-1, 300) | anything, "offset": st.integers(-1, 50),
    "persona_id": st.sampled_from(["a", "b"]) | anything, "session_id": st.text(max_size=4),
    "include_archived": st.booleans() | anything, "pinned": st.booleans() | anything,
}))
calls = plausible | plausible | noise


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    config = write_config(tmp_path_factory.mktemp("prop"))
    with front_in_process(config) as session:
        yield session, config, set()


@pytest.mark.slow
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=calls)
def test_random_tool_calls(server, call):
    name, args = call
    session, config, acknowledged = server
    result = session.call(name, args)
    if result.is_error:
        message = result.content[0].text
        # A crash shows only "Error executing tool NAME"; ours always says what was wrong.
        assert message.strip() != f"Error executing tool {name}", (name, args)
    else:
        assert result.structured_content is not None
        if name == "memorize":
            acknowledged.add(result.structured_content["id"])
        elif name == "delete_memory":
            acknowledged.discard(result.structured_content["id"])
    stored = {row[0] for row in db_rows(config, "SELECT id FROM documents")}
    assert acknowledged <= stored
    assert db_rows(config, "SELECT COUNT(*) FROM documents")[0][0] == \
        db_rows(config, "SELECT COUNT(*) FROM documents_fts")[0][0]


def test_integrity_after_random_calls(server):
    _, config, acknowledged = server
    assert db_rows(config, "PRAGMA integrity_check") == [("ok",)]
    print(f"{len(acknowledged)} acknowledged memories survived")
    stored = {row[0] for row in db_rows(config, "SELECT id FROM documents")}
    assert acknowledged <= stored
