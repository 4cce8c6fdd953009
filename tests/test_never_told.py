"""A question about something the user never said is answered with nothing, through the
official MCP client and the real `aokun hook prompt`, while what was said is still found, in
the question's language and across English and Chinese.

One person's everyday memories, embedded by the default local model (e5): recall refuses a
question when the store likely holds no answer (retrieval.min_answerable, the question-level
model of calibration.answerable), and a caller's own min_score turns that floor off. Access
reinforcement strengthens only what scored at or above the configured min_score. The MCP front
runs in this process; the stages a worker would run are run here by the worker's own runner.
"""

from __future__ import annotations

import json

import pytest

from helpers import aokun_as_a_host, db_rows, front_in_process, run_every_stage, wait_for, write_config
from shared.config import load_config

MEMORIES = {
    "allergy": "I'm allergic to peanuts and shellfish, so I always carry an EpiPen.",
    "dog": "My dog Biscuit is a three-year-old golden retriever who loves the beach.",
    "work": "I work as a nurse at St. Mary's Hospital, mostly on night shifts.",
    "sister": "我妹妹住在成都，她是一名小学老师。",
    "phone": "我的手机是去年买的华为Mate 60，用着很顺手。",
    "husband": "My husband Tom loves cooking Italian food on weekends.",
    "commute": "我每天早上骑自行车上班，大约二十分钟。",
    "vitamin": "I take vitamin D every morning because my doctor told me to.",
    "fruit": "我最喜欢的水果是芒果。",
    "piano": "My daughter Lily started piano lessons in September.",
}

# Never said, and far in words and meaning from every memory: P(answerable) about 0.06 here
# (e5), below every question the store answers (0.10-0.99), but not all below the default
# floor (0.06).
NEVER_TOLD = ["What is my passport number?", "What's my wifi password?"]
TOLD = ["What am I allergic to?", "我妹妹住在哪里？", "What does my husband like to cook?",
        "我女儿在学什么乐器？", "What fruit do I like best?"]

NO_ANSWER = "No memory is relevant"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The memories embedded and processed; the in-process front (no reinforcement, no cache),
    {key: id}, the config."""
    folder = tmp_path_factory.mktemp("never_told")
    config = write_config(folder, server={"exposed_tools": ["memorize", "recall"]},
                          retrieval={"access_reinforcement": False, "cache_enabled": False})
    with front_in_process(config) as model:
        ids = {key: model.ok("memorize", {"content": text})["id"] for key, text in MEMORIES.items()}
        run_every_stage(config)
        yield model, ids, config


def recalled(model, question: str, **arguments) -> tuple[list[dict], str]:
    """Recall's results and its text answer."""
    result = model.call("recall", {"query": question, **arguments})
    assert not result.is_error, result.content[0].text
    return result.structured_content["results"], result.content[0].text


# -- over the MCP client ------------------------------------------------------------------------


def answerable(model, question: str) -> float:
    return recalled(model, question, min_score=0, explain=True)[0][0]["explain"]["parts"]["answerable"]


def test_a_chinese_question_never_told_is_less_answerable_than_any_told(store):
    model, _, _ = store
    assert answerable(model, "我的血型是什么？") < min(answerable(model, q) for q in TOLD)


def test_a_question_never_told_is_less_answerable_than_any_told_and_a_floor_refuses_it(store, tmp_path):
    model, _, config = store
    never = {q: answerable(model, q) for q in NEVER_TOLD}
    told = {q: answerable(model, q) for q in TOLD}
    assert max(never.values()) < min(told.values()), (never, told)
    # A store configured with a floor between them answers the never-told with nothing, the
    # told with their memories; a caller's own min_score rules alone (the nearest come back).
    floor = (max(never.values()) + min(told.values())) / 2
    strict = write_config(tmp_path, storage={"data_dir": str(config.parent / "data")},
                          server={"exposed_tools": ["recall"]},
                          retrieval={"min_answerable": round(floor, 4), "cache_enabled": False,
                                     "access_reinforcement": False})
    with front_in_process(strict) as other:
        for question in NEVER_TOLD:
            results, text = recalled(other, question)
            assert results == [] and text.startswith(NO_ANSWER), text
            assert recalled(other, question, min_score=0)[0] != []
        assert all(recalled(other, question)[0] for question in TOLD)


@pytest.mark.parametrize("question, key", [("What am I allergic to?", "allergy"),
                                           ("我妹妹住在哪里？", "sister"),
                                           ("What does my husband like to cook?", "husband")])
def test_a_question_told_in_its_own_language_finds_its_memory(store, question, key):
    model, ids, _ = store
    assert ids[key] in [r["id"] for r in recalled(model, question)[0][:3]]


# Across languages the only evidence is the vectors' (and a graph keyword's): these questions
# stand just above the floor (P 0.10-0.37 here).
@pytest.mark.parametrize("question, key", [
    ("我女儿在学什么乐器？", "piano"), ("我丈夫喜欢做什么菜？", "husband"),
    ("What fruit do I like best?", "fruit"), ("What phone do I have?", "phone"),
    ("我的狗叫什么名字？", "dog")])
def test_a_question_in_the_other_language_finds_its_memory(store, question, key):
    model, ids, _ = store
    assert ids[key] in [r["id"] for r in recalled(model, question)[0][:3]]


# Whom a question asks about (shared/search/mentions.py): a person the store never mentions, in
# either language, answers nothing whatever the vectors say; one it mentions is left to the model.
@pytest.mark.parametrize("question, unmentioned", [
    ("What's my brother's job?", True), ("Where does my son go to school?", True),
    ("我爸爸做什么工作？", True), ("When is Anna's birthday?", True),
    ("What does my husband like to cook?", False), ("我妹妹住在哪里？", False),
    ("What does my little sister teach?", False),  # 妹妹: the sister family, across languages
    ("What is my passport number?", False)])  # nobody named: the model decides
def test_a_question_about_someone_never_mentioned_is_answered_with_nothing(store, question, unmentioned):
    model, _, _ = store
    explained = recalled(model, question, min_score=0, explain=True)[0]
    assert explained[0]["explain"]["parts"]["unmentioned"] is unmentioned
    if unmentioned:
        results, text = recalled(model, question)
        assert results == [] and text.startswith(NO_ANSWER), text


# -- in the host's prompt hook (the real CLI, recalling in its own process without vectors) ----


def prompt_hook(config, question: str) -> str:
    """What `aokun hook prompt` prints for a question; it must have recalled from the store."""
    hook = json.dumps({"session_id": "s", "transcript_path": "/tmp/none.jsonl", "cwd": "/tmp",
                       "hook_event_name": "UserPromptSubmit", "prompt": question})
    done = aokun_as_a_host(config, "hook", "prompt", "--verbose", stdin=hook)
    assert done.returncode == 0, done.stderr
    assert "from the store (bm25+graph_keyword)" in done.stderr, done.stderr
    return done.stdout


# The brother's blood type: nobody in the store is a brother (mentions.py), whatever the
# graph's keywords find; the passport: nothing shares its words (the hook recalls without vectors).
# finds nothing, and only the answerable floor keeps it from being printed.
@pytest.mark.parametrize("question", ["What is my passport number?", "What is my brother's blood type?"])
def test_the_prompt_hook_prints_nothing_for_a_question_never_told(store, question):
    _, _, config = store
    assert prompt_hook(config, question) == ""


def test_the_prompt_hook_prints_the_memory_a_question_shares_words_with(store):
    _, ids, config = store
    printed = prompt_hook(config, "What am I allergic to?")
    first = printed.splitlines()[1]
    assert first.startswith(f"[id {ids['allergy']} · ") and first.endswith(MEMORIES["allergy"]), printed


# -- access reinforcement -----------------------------------------------------------------------


def access_count(config, memory_id: int) -> int:
    return db_rows(config, "SELECT access_count FROM documents WHERE id = ?", (memory_id,))[0][0]


def test_filler_recalled_below_the_configured_floor_is_not_reinforced(store, tmp_path):
    _, ids, config = store
    data = config.parent / "data"
    reinforcing = write_config(tmp_path, storage={"data_dir": str(data)},
                               server={"exposed_tools": ["recall"]},
                               retrieval={"access_reinforcement": True, "cache_enabled": False})
    floor = load_config(reinforcing).retrieval.min_score
    with front_in_process(reinforcing) as model:
        results, _ = recalled(model, "What fruit do I like best?", k=len(MEMORIES), min_score=0)
        real = results[0]["id"]
        fillers = [r["id"] for r in results if r["score"] < floor]
        assert real == ids["fruit"] and results[0]["score"] >= floor and fillers, results
        # The reinforcer touches a recall's memories in one job, on one thread, in order: once
        # the real hit counts its access, a filler touched with it would count one too.
        wait_for(lambda: access_count(config, real) == 1, 30, what="the real hit reinforced")
    assert [access_count(config, filler) for filler in fillers] == [0] * len(fillers)
