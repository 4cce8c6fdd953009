"""Scores a host can act on, through the official MCP client and the real front: a probability
of relevance that does not follow the other candidates (no 1.000 for whatever comes first)."""

from __future__ import annotations

from helpers import front_in_process, write_config


def test_scores_say_how_well_a_memory_answers_not_that_it_came_first(tmp_path):
    config = write_config(tmp_path, server={"exposed_tools": ["memorize", "recall"]})
    with front_in_process(config) as s:
        tokyo = s.ok("memorize", {"content": "We spent a week in Tokyo in April and loved the ramen.",
                                  "metadata": {"persona_id": "me"}})["id"]
        s.ok("memorize", {"content": "My manager moved the quarterly review to Thursday.",
                          "metadata": {"persona_id": "me"}})
        exact = s.ok("recall", {"query": "Tokyo ramen in April", "persona_id": "me"})["results"]
        partial = s.ok("recall", {"query": "Tokyo hotel prices for families in summer",
                                  "persona_id": "me", "min_score": 0})["results"]
        assert exact[0]["id"] == partial[0]["id"] == tokyo
        # The same memory first both times, but a question it answers only in part scores lower.
        assert 0 < partial[0]["score"] < exact[0]["score"] < 1
        assert exact[0]["score"] != 1.0
        # Nothing of a cat was said: nothing comes back, and the text says so.
        cat = s.call("recall", {"query": "Tell me about the cat", "persona_id": "me"})
        assert cat.structured_content["results"] == []
        assert "No memory is relevant enough" in cat.content[0].text
        # A floor above the best score answers nothing; below it, the memory.
        best = exact[0]["score"]
        assert s.ok("recall", {"query": "Tokyo ramen in April", "persona_id": "me",
                               "min_score": round(best + 0.01, 3)})["results"] == []
