"""Conversation turns in recall: a turn by someone the question names gains
retrieval.named_speaker_boost, a turn that asks loses retrieval.question_turn_penalty (the
turn answering it states the fact). A question about what one person did across a
conversation (LoCoMo's multi-hop questions) is answered by that person's statements, not by
the other's questions that share its words.

The turn tests read focus.speaker and focus.asks; the recall tests memorize turns through the
official MCP client (BM25 only: the turns' words decide, no vectors) and recall with explain.
"""

from __future__ import annotations

import pytest

from helpers import front_in_process, write_config
from shared.search.focus import asks, speaker


@pytest.mark.parametrize("text, who, asking", [
    ("[2023-05-08 13:56] Caroline: I went to a support group yesterday.", "Caroline", False),
    ("Nate: What games do you play these days?", "Nate", True),
    ("[2024-03-01] 小王：你周末去哪儿了？", "小王", True),
    ("小李：我周末去爬山了。", "小李", False),
    ("Bart tried the mango ice cream and felt very happy.", None, False),  # an event, not a turn
    ("Tim: Hi!\nJohn: Hello, how are you?", None, True),  # a transcript is not one turn
])
def test_a_turn_says_who_said_it_and_whether_it_asks(text, who, asking):
    assert speaker(text) == who
    assert asks(text) is asking


def recall_turns(tmp_path, turns: list[str], question: str, boost: float, penalty: float) -> list[tuple]:
    """(text without its time marker, score shift) of each result, best first, with the given
    boost and penalty."""
    config = write_config(tmp_path, server={"exposed_tools": ["memorize", "recall"]},
                          retrieval={"channels": ["bm25"], "named_speaker_boost": boost,
                                     "question_turn_penalty": penalty, "atom_type_boost": 0.0,
                                     "access_reinforcement": False, "cache_enabled": False,
                                     "min_score": 0.0})
    with front_in_process(config) as s:
        if not s.ok("recall", {"query": question, "persona_id": "p"})["results"]:
            for turn in turns:
                s.ok("memorize", {"content": turn, "metadata": {"persona_id": "p", "session_id": "s1"}})
        results = s.ok("recall", {"query": question, "persona_id": "p", "explain": True})["results"]
    return [(r["text"].split("] ", 1)[-1], r["explain"]["parts"]["routes"]["shift"]) for r in results]


def test_the_named_persons_statement_outranks_the_question_that_shares_the_words(tmp_path):
    turns = ["Tim: John, which books have you read lately?", "John: I finished Dune last week."]
    question = "What books has John read?"
    # BM25 alone: Tim's question holds books, John and read; John's answer only John (and,
    # through its context, Tim's words at half weight): the question leads.
    assert recall_turns(tmp_path, turns, question, 0.0, 0.0) == [(turns[0], 0.0), (turns[1], 0.0)]
    # John is named: +0.5 to his turn; Tim's turn asks: -0.5. A fused score is within [0, 1],
    # so the answer (at least 0.5 above its own) passes the question (at most 1 - 0.5).
    assert recall_turns(tmp_path, turns, question, 0.5, 0.5) == [(turns[1], 0.5), (turns[0], -0.5)]


def test_the_same_in_chinese(tmp_path):
    turns = ["小李：小王，你最近在看什么书？", "小王：我在看《三体》。"]
    question = "小王最近在看什么书？"
    # 小李's question holds 小王, 最近, 看, 什么 and 书; 小王's answer 小王 and 看 (and 小李's
    # words through its context): the question leads until the shifts apply.
    assert recall_turns(tmp_path, turns, question, 0.0, 0.0) == [(turns[0], 0.0), (turns[1], 0.0)]
    assert recall_turns(tmp_path, turns, question, 0.5, 0.5) == [(turns[1], 0.5), (turns[0], -0.5)]


def test_a_turn_whose_speaker_the_question_does_not_name_gains_nothing(tmp_path):
    turns = ["Tim: I finished Dune last week.", "John: Nice, I read it too."]
    shifts = dict(recall_turns(tmp_path, turns, "Which book did Tim finish?", 0.5, 0.5))
    assert shifts == {turns[0]: 0.5, turns[1]: 0.0}
