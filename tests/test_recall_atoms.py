"""Atoms in recall: a question about likes or plans favours the memories holding a still-valid
preference or planned atom (retrieval.atom_type_boost added to their fused score).

The cue tests read intent.wanted_atom_types on zh and en questions; the recall tests memorize
through the official MCP client, let the worker's stages (run here) extract the atoms, and recall with explain.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import front_in_process, run_every_stage, write_config
from shared.config import RetrievalConfig
from shared.search.intent import wanted_atom_types


@pytest.mark.parametrize("question, wanted", [
    ("What kind of tea does Ann like?", ("preference",)),
    ("Does Ann hate spicy food?", ("preference",)),
    ("Ann 最喜欢什么茶？", ("preference",)),
    ("What are Ann's plans for the weekend?", ("planned",)),
    ("我明天有什么安排？", ("planned",)),
    ("What will Ann cook tomorrow, something she likes?", ("preference", "planned")),
    ("Where did Ann go yesterday?", ()),
    ("Ann 昨天去了哪里？", ()),
    ("Is Ann unlikely to come?", ()),  # a cue counts as a whole word only
])
def test_cues_name_the_atom_types_a_question_asks_about(question, wanted):
    assert wanted_atom_types(question, RetrievalConfig()) == wanted


def recall_config(tmp_path, api, boost: float):
    return write_config(
        tmp_path, embedding={"provider": "openai", "base_url": api.base_url, "model": "fake", "dimensions": 32},
        queue={"retry_base_s": 0.2}, server={"exposed_tools": ["memorize", "recall"]},
        retrieval={"channels": ["bm25"], "atom_type_boost": boost, "access_reinforcement": False,
                   "cache_enabled": False, "min_score": 0.0})


def recall_with_boosts(tmp_path, memories: list[tuple[str, datetime]], question: str) -> dict:
    """{boost: [(text, favoured by the boost), ...] best first} for the question, asked of the
    memories (their atoms made by the worker's stages) at atom_type_boost 0 and 1."""
    answers = {}
    with FakeEmbeddingsServer(dim=32) as api:
        config = recall_config(tmp_path, api, 0.0)
        with front_in_process(config) as s:
            for text, when in memories:
                s.ok("memorize", {"content": text, "metadata": {"persona_id": "ann",
                                                                "original_time": when.isoformat()}})
        run_every_stage(config)
        for boost in (0.0, 1.0):
            recall_config(tmp_path, api, boost)
            with front_in_process(config) as s:
                results = s.ok("recall", {"query": question, "persona_id": "ann", "k": 5,
                                          "explain": True})["results"]
            answers[boost] = [(r["text"].split("] ", 1)[-1], r["explain"]["parts"]["routes"]["atom_type_boost"])
                              for r in results]
    return answers


@pytest.mark.slow
def test_a_question_about_likes_favours_the_memory_that_states_one(tmp_path):
    # BM25 alone: "tea" and "Ann" are in the purchase, only "Ann" in the liking, so the purchase
    # leads. The liking is a preference atom (loves); the purchase is not.
    now = datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None)
    answers = recall_with_boosts(tmp_path, [("Ann bought green tea at the market.", now),
                                            ("Ann loves oolong.", now)],
                                 "What tea does Ann like?")
    assert answers[0.0] == [("Ann bought green tea at the market.", False), ("Ann loves oolong.", False)]
    # A boost of 1 lifts the liking above anything the fusion alone can score (at most 1).
    assert answers[1.0] == [("Ann loves oolong.", True), ("Ann bought green tea at the market.", False)]


@pytest.mark.slow
def test_a_question_about_plans_favours_plans_still_ahead_in_chinese(tmp_path):
    # 计划 is a plan cue. The Shanghai trip next week is a plan still ahead; the Hangzhou trip
    # was planned for the day after a day 400 days ago, so its deadline has passed and it no
    # longer answers; last month's Shanghai trip is told, not planned.
    now = datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None)
    answers = recall_with_boosts(tmp_path, [("我上个月去上海出差了，上海很热。", now),
                                            ("我下周要去上海出差。", now),
                                            ("我明天要去上海和杭州。", now - timedelta(days=400))],
                                 "上海的计划")
    # BM25 alone: 上海 twice puts last month's trip first; the plan does not lead.
    assert answers[0.0][0] == ("我上个月去上海出差了，上海很热。", False)
    assert ("我下周要去上海出差。", False) in answers[0.0][1:]
    assert answers[1.0] == [("我下周要去上海出差。", True), ("我上个月去上海出差了，上海很热。", False),
                            ("我明天要去上海和杭州。", False)]
