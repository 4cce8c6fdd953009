"""The atom classifier, time expressions and slots, on facts phrased as people say them."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest

from shared.config import AtomsConfig
from shared.extract.atomize import AtomRules
from shared.extract.timeparse import deadline

FACTS = [
    # planned
    ("明天上午十点去医院复查", "planned"),
    ("下周三要和客户开项目评审会", "planned"),
    ("我打算月底前把房租交了", "planned"),
    ("后天晚上约了老王吃火锅", "planned"),
    ("记得提醒我周五交报告", "planned"),
    ("两天后出发去成都出差", "planned"),
    ("I'm going to visit my parents next weekend", "planned"),
    ("I have a dentist appointment tomorrow at 3pm", "planned"),
    ("We plan to move to Berlin in two weeks", "planned"),
    ("Remind me to call the plumber on Friday", "planned"),
    ("I need to submit the tax form by March 5", "planned"),
    ("The team will launch the beta next Monday", "planned"),
    # episodic
    ("昨天去西湖边跑了十公里", "episodic"),
    ("上周末我们去看了一场演唱会", "episodic"),
    ("去年在杭州参加了马拉松", "episodic"),
    ("刚才在楼下咖啡店碰见了以前的同桌", "episodic"),
    ("前天晚上吃了一顿很棒的日料", "episodic"),
    ("I went hiking in the Alps last summer", "episodic"),
    ("Yesterday I watched the new Dune movie", "episodic"),
    ("We celebrated our anniversary at a small Italian place last night", "episodic"),
    ("I finished my first half marathon two weeks ago", "episodic"),
    ("Last week I visited the science museum with the kids", "episodic"),
    ("Caroline attended an LGBTQ support group yesterday", "episodic"),
    # factual
    ("我对花生过敏", "factual"),
    ("我的血型是O型", "factual"),
    ("我住在上海浦东", "factual"),
    ("我是一名软件工程师", "factual"),
    ("我的生日是十月三号", "factual"),
    ("我会说粤语和英语", "factual"),
    ("I am allergic to penicillin", "factual"),
    ("My birthday is on July 14", "factual"),
    ("I work as a nurse at the city hospital", "factual"),
    ("I live in Lisbon", "factual"),
    ("I was born in Chengdu", "factual"),
    ("My car is a blue Honda Civic", "factual"),
    # relational
    ("小李是我大学同学", "relational"),
    ("王芳是我的表姐", "relational"),
    ("张伟和我是同事", "relational"),
    ("我和老陈认识二十年了", "relational"),
    ("她男朋友是个摄影师", "relational"),
    ("Alice is Bob's colleague", "relational"),
    ("Tom is my best friend from high school", "relational"),
    ("My sister Emma is a lawyer", "relational"),
    ("Mark and I have been married for ten years", "relational"),
    ("Jenny is my new roommate", "relational"),
    ("Carlos works with my brother", "relational"),
    # preference
    ("我喜欢喝不加糖的绿茶", "preference"),
    ("我讨厌下雨天出门", "preference"),
    ("我最爱吃妈妈做的红烧肉", "preference"),
    ("比起咖啡我更喜欢茶", "preference"),
    ("我不喜欢太吵的餐厅", "preference"),
    ("I love jazz, especially Miles Davis", "preference"),
    ("I prefer window seats on flights", "preference"),
    ("I can't stand horror movies", "preference"),
    ("I really enjoy painting landscapes", "preference"),
    ("Oat milk is my favourite in coffee", "preference"),
    ("I hate waking up early", "preference"),
    # unknown
    ("嗯嗯", "unknown"),
    ("好的没问题", "unknown"),
    ("哈哈哈太好笑了", "unknown"),
    ("这个怎么说呢", "unknown"),
    ("Sounds good to me", "unknown"),
    ("Wow, that's amazing", "unknown"),
    ("Hmm, not sure about that", "unknown"),
    ("Thanks so much!", "unknown"),
    ("Okay, see you", "unknown"),
]


@pytest.fixture(scope="module")
def rules():
    return AtomRules.load()


def test_table_has_enough_facts_of_every_type():
    counts = Counter(t for _, t in FACTS)
    assert len(FACTS) >= 60 and min(counts.values()) >= 9


def test_classifier_accuracy_per_type(rules):
    right, total, misses = Counter(), Counter(), []
    for text, expected in FACTS:
        got, confidence = rules.classify(text)
        total[expected] += 1
        if got == expected:
            right[expected] += 1
        else:
            misses.append((text, expected, got))
        assert 0 < confidence <= 0.95
    accuracy = {t: right[t] / total[t] for t in total}
    print("accuracy per type:", {t: round(a, 2) for t, a in accuracy.items()}, "misses:", misses)
    assert sum(right.values()) / len(FACTS) >= 0.9, misses
    assert min(accuracy.values()) >= 0.8, misses


ANCHOR = datetime(2024, 3, 6, 10, 0)  # a Wednesday


@pytest.mark.parametrize("text, due", [
    ("明天去体检", datetime(2024, 3, 7, 23, 59, 59)),
    ("后天交报告", datetime(2024, 3, 8, 23, 59, 59)),
    ("下周三开会", datetime(2024, 3, 13, 23, 59, 59)),
    ("月底前交房租", datetime(2024, 3, 31, 23, 59, 59)),
    ("3月15日去北京", datetime(2024, 3, 15, 23, 59, 59)),
    ("下午五点开会", datetime(2024, 3, 6, 17, 0)),
    ("明天下午三点半面试", datetime(2024, 3, 7, 15, 30)),
    ("两天后出发", datetime(2024, 3, 8, 23, 59, 59)),
    ("I have a dentist appointment tomorrow", datetime(2024, 3, 7, 23, 59, 59)),
    ("We fly out next Friday", datetime(2024, 3, 15, 23, 59, 59)),
    ("The release is on March 20", datetime(2024, 3, 20, 23, 59, 59)),
    ("Let's meet in two weeks", datetime(2024, 3, 20, 23, 59, 59)),
    ("Call mom at 5pm", datetime(2024, 3, 6, 17, 0)),
    ("The review is on 12 April at 3:30 pm", datetime(2024, 4, 12, 15, 30)),
    ("no time here", None),
])
def test_deadlines(text, due):
    assert deadline(text, ANCHOR) == due


@pytest.mark.parametrize("text, speaker, slots", [
    ("I live in Beijing", None, ("self", "lives_in", "beijing")),
    ("I now live in Shanghai", None, ("self", "lives_in", "shanghai")),
    ("my favourite drink is tea now", "Alice", ("alice", "favourite:drink", "tea")),
    ("My favorite drink is coffee", None, ("self", "favourite:drink", "coffee")),
    ("我住在北京", None, ("self", "lives_in", "北京")),
    ("我现在住在上海", None, ("self", "lives_in", "上海")),
    ("我最喜欢的水果是芒果", None, ("self", "最喜欢:水果", "芒果")),
    ("I like tea", None, None),
    ("我们昨天住在北京的酒店", None, None),
])
def test_slots_only_from_trusted_shapes(rules, text, speaker, slots):
    assert rules.slots_of(text, speaker) == slots


def test_ttl_formula():
    from shared.extract.atomize import ttl_days

    config = AtomsConfig()
    assert ttl_days("episodic", 0.5, 0, config) == pytest.approx(7.0)
    assert ttl_days("factual", 1.0, 2, config) == pytest.approx(180 * 1.5 * 2.0)
    assert ttl_days("planned", 0.0, 1, config) == pytest.approx(2 * 0.5 * 1.5)
