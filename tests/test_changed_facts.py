"""A fact that changed answers as it is now, and every fact knows whose it is,
through the official MCP client and the worker's stages (both in this process).

The old fact is memorized months back, the statement of change last week; the question, whose
words the old memory matches best (recalled by BM25 alone, which finds both), gets the newer
memory first, the older right below it and explained as replaced by it. search_atoms shows each
atom's subject; the session-start profile (the real CLI) keeps other people's preferences and
plans apart from the user's, named.
The newer fact wins by when it was said, also when the older memory is stored and processed
after it (an old history imported later), on both engines.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import WorkerHere, aokun_in_process, db_rows, front_in_process, run_every_stage, write_config
from servers import storage_of
from shared.search.fusion import newer_first


def config_for(tmp_path, api, **sections):
    return write_config(
        tmp_path, **sections,
        embedding={"provider": "openai", "base_url": api.base_url, "model": "fake", "dimensions": 32},
        queue={"retry_base_s": 0.2}, server={"exposed_tools": ["memorize", "recall", "search_atoms"]},
        retrieval={"channels": ["bm25"], "access_reinforcement": False, "cache_enabled": False,
                   "min_score": 0.0})


def memorize_in_order(s, worker: WorkerHere, memories: list[tuple[str, datetime]], persona: str) -> None:
    """Each memory memorized once the one before it has its atoms (the worker's stages take
    them in the order they were said, as a user tells them)."""
    for text, when in memories:
        done = atoms_done(worker.config)
        s.ok("memorize", {"content": text, "metadata": {"persona_id": persona, "original_time": when.isoformat()}})
        worker.run_every_stage()
        assert atoms_done(worker.config) == done + 1, text


def atoms_done(config) -> int:
    return db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE stage = 'atoms' AND status = 'done'")[0][0]


@pytest.mark.slow
def test_a_changed_fact_answers_with_the_newer_memory_first_in_both_languages(tmp_path):
    now = datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None)
    months_ago, last_week = now - timedelta(days=150), now - timedelta(days=6)
    cases = [
        ("en-home", [("I live in Toronto.", months_ago),
                     ("We finally moved from Toronto to Vancouver.", last_week)], "Do I still live in Toronto?"),
        ("zh-home", [("我们家住在杭州滨江区。", months_ago),
                     ("上个月我们从杭州搬到了苏州工业园区。", last_week)], "我们家住在杭州吗？"),
        ("zh-car", [("我开一辆白色的本田雅阁。", months_ago),
                    ("我把旧车卖了，换了一辆特斯拉。", last_week)], "我开的车是本田雅阁还是特斯拉？"),
        ("en-job", [("I work as a data analyst at Northwind Insurance.", months_ago),
                    ("Started my new job as a product manager at Contoso; left Northwind.", last_week)],
         "Do I work at Northwind Insurance?"),
    ]
    with FakeEmbeddingsServer(dim=32) as api:
        config = config_for(tmp_path, api)
        worker = WorkerHere(config)
        try:
            with front_in_process(config) as s:
                for persona, memories, _ in cases:
                    memorize_in_order(s, worker, memories, persona)
        finally:
            worker.close()
        with front_in_process(config) as s:
            for persona, (old, new), question in cases:
                results = s.ok("recall", {"query": question, "persona_id": persona, "k": 5, "explain": True})["results"]
                texts = [r["text"].split("] ", 1)[-1] for r in results]
                assert texts[:2] == [new[0], old[0]], (persona, texts)
                replaced_by = [r["explain"]["parts"]["routes"]["replaced_by"] for r in results]
                assert replaced_by[:2] == [None, results[0]["id"]], persona


@pytest.mark.slow
def test_atoms_and_the_session_start_profile_say_whose_each_fact_is(tmp_path):
    now = datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None)
    memories = ["My wife Sarah loves orchids.", "My mom prefers roses over tulips.", "I love hiking in the mountains.",
                "我老婆最喜欢向日葵。", "同事老周下周要去成都出差。", "I have a dentist appointment in three weeks."]
    with FakeEmbeddingsServer(dim=32) as api:
        config = config_for(tmp_path, api)
        with front_in_process(config) as s:
            for text in memories:
                s.ok("memorize", {"content": text,
                                  "metadata": {"persona_id": "me", "original_time": now.isoformat()}})
            run_every_stage(config)
            atoms = s.ok("search_atoms", {"query": "orchids roses hiking 向日葵 成都", "persona_id": "me"})["atoms"]
    subjects = {a["text"]: a["subject"] for a in atoms}
    assert subjects["My wife Sarah loves orchids."] == "Sarah (wife)"
    assert subjects["My mom prefers roses over tulips."] == "mom"
    assert subjects["I love hiking in the mountains."] == "self"
    assert subjects["我老婆最喜欢向日葵。"] == "老婆"
    assert subjects["同事老周下周要去成都出差。"] == "老周 (同事)"
    started = json.dumps({"session_id": "abc", "hook_event_name": "SessionStart", "source": "startup"})
    env = {k: v for k, v in os.environ.items() if k != "AOKUN_CONFIG"}
    done = aokun_in_process("hook", "session-start", "--persona", "me", "--budget", "1200",
                            "--config", config, stdin=started, env=env)
    assert done.returncode == 0, done.stderr
    own, _, others = done.stdout.partition("About other people:")
    assert "I love hiking in the mountains." in own and "dentist appointment" in own
    for text in ("orchids", "roses", "向日葵", "成都"):
        assert text not in own and text in others, text
    assert "- Sarah (wife): My wife Sarah loves orchids." in others
    assert "- 老周 (同事): by " in others


def test_a_replaced_memory_ranks_right_below_the_memory_that_replaced_it():
    assert newer_first([(1, 0.9), (2, 0.5), (3, 0.4)], {1: 3}) == [(3, 0.9), (1, 0.9), (2, 0.5)]
    assert newer_first([(3, 0.9), (1, 0.5)], {1: 3}) == [(3, 0.9), (1, 0.5)]  # already below it
    assert newer_first([(1, 0.9), (2, 0.5)], {1: 3}) == [(1, 0.9), (2, 0.5)]  # the newer not found
    # a chain: 1 replaced by 2, replaced by 3
    assert [i for i, _ in newer_first([(1, 0.9), (2, 0.6), (3, 0.3)], {1: 2, 2: 3})] == [3, 2, 1]


# -- superseding follows when things were said, not the order they were processed -----------------

@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_later_said_fact_wins_when_the_older_memory_is_processed_last(tmp_path, engine):
    """An old history imported after the newer statement of change (the older memory has the
    higher id, and the worker takes it last) still ends replaced by the newer one."""
    now = datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None)
    months_ago, last_week = now - timedelta(days=150), now - timedelta(days=6)
    cases = [("en-home", "We finally moved from Toronto to Vancouver.", "I live in Toronto.",
              "Do I still live in Toronto?"),
             ("zh-car", "我把旧车卖了，换了一辆特斯拉。", "我开一辆白色的本田雅阁。", "我开的车是本田雅阁还是特斯拉？")]
    with FakeEmbeddingsServer(dim=32) as api, storage_of(engine) as storage:
        config = config_for(tmp_path, api, storage=storage)
        with front_in_process(config) as s:
            for persona, new, old, _ in cases:
                for text, when in ((new, last_week), (old, months_ago)):
                    s.ok("memorize", {"content": text, "metadata": {"persona_id": persona,
                                                                    "original_time": when.isoformat()}})
        run_every_stage(config)
        with front_in_process(config) as s:
            for persona, new, old, question in cases:
                results = s.ok("recall", {"query": question, "persona_id": persona, "k": 5, "explain": True})["results"]
                texts = [r["text"].split("] ", 1)[-1] for r in results]
                assert texts[:2] == [new, old], (persona, texts)
                replaced_by = [r["explain"]["parts"]["routes"]["replaced_by"] for r in results]
                assert replaced_by[:2] == [None, results[0]["id"]], persona
                atoms = s.ok("search_atoms", {"query": question, "persona_id": persona})["atoms"]
                assert [a["text"] for a in atoms] == [new], (persona, atoms)
