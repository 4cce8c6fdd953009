"""Answers that fit a context window, through the official MCP client: recall's text is one
line a memory while its structured content keeps every field; nothing when nothing is relevant
enough; a character budget; a fact stored twice comes back once; the other tools answer in
compact JSON."""

from __future__ import annotations

import json

import pytest

from helpers import front_in_process, write_config
from shared.config import ALL_TOOLS

HIT_FIELDS = {"id", "text", "persona_summary", "score", "importance", "pinned", "original_time",
              "topics", "participants", "session_id", "persona_id", "explain", "duplicates"}


@pytest.fixture
def s(tmp_path):
    # No access reinforcement: recalling does not change the next recall's scores.
    config = write_config(tmp_path, server={"exposed_tools": list(ALL_TOOLS)},
                          retrieval={"access_reinforcement": False})
    with front_in_process(config) as session:
        yield session


def recall(session, arguments: dict):
    """(text content, structured results) of a recall that must succeed."""
    result = session.call("recall", arguments)
    assert not result.is_error, result.content[0].text
    assert len(result.content) == 1
    return result.content[0].text, result.structured_content["results"]


def test_recall_text_is_one_line_a_memory_and_structured_content_keeps_every_field(s):
    plain = s.ok("memorize", {"content": "Ann grows tomatoes in her\ngarden", "metadata": {
        "original_time": "2024-05-08T13:56:00", "persona_id": "ann"}})
    profiled = s.ok("memorize", {"content": "Ann waters the garden every morning", "metadata": {
        "persona_id": "ann", "persona_summary": "Ann, a keen gardener"}})
    text, results = recall(s, {"query": "garden", "persona_id": "ann", "min_score": 0})
    assert sorted(r["id"] for r in results) == sorted([plain["id"], profiled["id"]])
    lines = text.split("\n")
    assert len(lines) == len(results)
    for line, hit in zip(lines, results):
        assert set(hit) == HIT_FIELDS
        assert line.startswith(f"[id {hit['id']} · {hit['score']:.2f}] ")
    by_id = {r["id"]: line for r, line in zip(results, lines)}
    assert by_id[plain["id"]].endswith("[2024-05-08 13:56] Ann grows tomatoes in her / garden")
    assert by_id[profiled["id"]].endswith("Ann waters the garden every morning "
                                          "(persona: Ann, a keen gardener)")
    first = next(r for r in results if r["id"] == plain["id"])
    assert first["persona_summary"] is None and first["duplicates"] == []
    # Given without an offset, it is read on the user's clock (memory.time_zone) and kept with it.
    assert first["text"] == plain["text"] and first["original_time"].startswith("2024-05-08T13:56:00")


def test_nothing_relevant_enough_is_an_empty_answer_that_says_so(s):
    s.ok("memorize", {"content": "I moved to Tokyo last spring", "metadata": {"persona_id": "ann"}})
    text, results = recall(s, {"query": "Tokyo", "min_score": 1.0})
    assert results == []
    assert text == "No memory is relevant enough to this query (min_score 1)."
    text, results = recall(s, {"query": "Tokyo", "persona_id": "nobody"})
    assert results == []
    assert text.startswith("No memory is relevant enough to this query (min_score ")


def test_a_budget_keeps_the_best_whole_lines_that_fit(s):
    for i in range(12):
        s.ok("memorize", {"content": f"garden note {i}: " + "the roses need water and shade " * (1 + i % 4)})
    full, everything = recall(s, {"query": "garden roses", "k": 12, "min_score": 0})
    assert len(everything) == 12
    lines = dict(zip((r["id"] for r in everything), full.split("\n")))
    for budget in (100, 250, 600):
        text, kept = recall(s, {"query": "garden roses", "k": 12, "min_score": 0,
                                "max_chars": budget})
        assert 0 < len(kept) < 12 and len(text) <= budget, (budget, len(text))
        assert text == "\n".join(lines[r["id"]] for r in kept)  # whole lines, best first
        order = [r["id"] for r in everything]
        assert [order.index(r["id"]) for r in kept] == sorted(order.index(r["id"]) for r in kept)
    text, kept = recall(s, {"query": "garden roses", "min_score": 0, "max_chars": 100,
                            "persona_id": "nobody"})
    assert kept == [] and len(text) <= 100
    assert text == ("No memory relevant enough to this query (min_score 0) fits in max_chars 100.")


def test_the_same_fact_stored_twice_comes_back_once(s):
    first = s.ok("memorize", {"content": "My sister Mei lives in Lisbon",
                              "metadata": {"original_time": "2024-01-02T10:00:00"}})
    second = s.ok("memorize", {"content": "my sister  Mei lives in Lisbon",
                               "metadata": {"original_time": "2024-03-04T10:00:00"}})
    s.ok("memorize", {"content": "Mei works at a bakery in Lisbon"})
    text, results = recall(s, {"query": "sister Mei Lisbon", "min_score": 0})
    ids = [r["id"] for r in results]
    assert len({first["id"], second["id"]} & set(ids)) == 1, ids
    kept = next(r for r in results if r["id"] in (first["id"], second["id"]))
    other = second["id"] if kept["id"] == first["id"] else first["id"]
    assert kept["duplicates"] == [other]
    assert f"(also stored as {other})" in text.split("\n")[ids.index(kept["id"])]


def test_search_atoms_says_when_nothing_is_found(s):
    result = s.call("search_atoms", {"query": "dentist", "min_score": 0.5})
    assert not result.is_error and result.structured_content == {"atoms": []}
    assert result.content[0].text == \
        "No active atom is relevant enough to this query (min_score 0.5)."
    result = s.call("search_atoms", {"types": ["planned"]})
    assert result.content[0].text == "No active atom of type planned."


def test_other_tools_answer_in_compact_json_without_nulls(s):
    result = s.call("memorize", {"content": "compact answers"})
    text = result.content[0].text
    assert "\n" not in text and ": " not in text
    assert json.loads(text) == {k: v for k, v in result.structured_content.items() if v is not None}
    assert "persona_id" in result.structured_content and "persona_id" not in json.loads(text)
    listed = s.call("list_memories", {})
    assert "\n" not in listed.content[0].text
    assert json.loads(listed.content[0].text)["total"] == 1
