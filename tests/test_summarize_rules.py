"""The rules summarizer: a conversation to a structured memory, offline and deterministic.

English and Chinese conversations: participants, topics, one key fact per stated fact with its
speaker as subject, dates resolved against the conversation's time, sentiment, importance, small
talk and questions left out; the same output twice. Its time per session is measured by
scripts/bench_summarize.py, not here.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from shared.config import SummarizerConfig, TextConfig
from shared.extract.atomize import AtomRules
from shared.extract.timeparse import date_mentions, deadline
from shared.summarize.conversation import Turn, parse_conversation
from shared.summarize.rewrite import third_person
from shared.summarize.rules import RulesSummarizer
from shared.summarize.schema import StructuredMemory
from shared.text.segment import Segmenter

SAID_AT = datetime(2023, 5, 8, 13, 56)  # a Monday

ENGLISH = """Caroline: Hey Mel! Good to see you! How have you been?
Melanie: Hey Caroline! Good to see you! I'm swamped with the kids and work. What's new with you?
Caroline: I adopted a cat last Saturday at the shelter in Portland, and I spent the whole weekend setting up a cozy corner with toys for her.
Melanie: Wow, that's awesome! Congrats!
Caroline: Thanks! My sister Emma helped me pick her out, and she is coming over next week to help me build a scratching post.
Melanie: That's so sweet. What do you do to relax these days?
Caroline: I love pottery. I take a pottery class every Tuesday evening and my pottery teacher says my bowls are getting better.
Melanie: I'm flying to Paris next Friday with my husband to see the Louvre, and I booked a pottery workshop there too.
Caroline: Sounds great! Have fun!
Melanie: Thanks, talk soon!"""  # noqa: E501 - one turn a line

CHINESE = """小李：小王，最近怎么样？
小王：挺好的！我上周六去了动物收容所，领养了一只猫，叫咪咪，特别可爱。
小李：太好了！我下周三要去北京出差，和张伟一起见客户。
小王：我喜欢喝咖啡，不喜欢喝茶。
小李：我妹妹在上海工作，她下个月结婚。
小王：哈哈，好的，再见！"""


@pytest.fixture(scope="module")
def rules() -> RulesSummarizer:
    return RulesSummarizer(AtomRules.load(), Segmenter(TextConfig()))


def summarize(rules: RulesSummarizer, text: str, **config) -> StructuredMemory:
    return rules.summarize(parse_conversation(text, SAID_AT), SummarizerConfig(**config))


def test_english_conversation(rules):
    memory = summarize(rules, ENGLISH)
    assert memory.provider == "rules"
    # The speakers, then the person named; not the city, the museum or the pet.
    assert memory.participants == ["Caroline", "Melanie", "Emma"]
    assert "pottery" in memory.topics and len(memory.topics) <= 5
    facts = memory.key_facts
    assert facts == [
        "Caroline adopted a cat last Saturday (6 May 2023) at the shelter in Portland, and Caroline spent "
        "the whole weekend setting up a cozy corner with toys for her.",
        "Caroline's sister Emma helped Caroline pick her out, and she is coming over next week (the week of "
        "15 May 2023) to help Caroline build a scratching post.",
        # Two sentences, two stated facts: two key facts.
        "Caroline loves pottery.",
        "Caroline takes a pottery class every Tuesday evening and Caroline's pottery teacher says Caroline's "
        "bowls are getting better.",
        "Melanie is flying to Paris next Friday (19 May 2023) with Melanie's husband to see the Louvre, and "
        "Melanie booked a pottery workshop there too."]
    # Greetings, questions and small talk are not facts.
    for small_talk in ("Good to see", "Congrats", "Sounds great", "talk soon", "What do you do", "swamped"):
        assert not any(small_talk in fact for fact in facts), small_talk
    assert memory.summary == " ".join(facts)
    assert memory.sentiment == "positive"
    # Who is who: each speaker with what they talked about (kept as a fact or not), who was named.
    caroline, melanie, named = memory.persona_summary.split("; ")
    assert caroline.startswith("Caroline talked about pottery, cat, shelter")
    assert melanie.startswith("Melanie talked about ") and "Louvre" in melanie
    assert named == "also mentioned: Emma."


def test_a_plans_date_reads_back_as_its_deadline(rules):
    """The date written into a plan is the one the atoms stage will read as its deadline."""
    plan = summarize(rules, ENGLISH).key_facts[-1]
    assert deadline(plan, SAID_AT) == datetime(2023, 5, 19, 23, 59, 59)
    chinese_plan = summarize(rules, CHINESE).key_facts[1]
    assert deadline(chinese_plan, SAID_AT) == datetime(2023, 5, 17, 23, 59, 59)


def test_chinese_conversation(rules):
    memory = summarize(rules, CHINESE)
    assert memory.participants == ["小李", "小王", "张伟"]
    assert {"收容所", "客户"} <= set(memory.topics)
    assert memory.key_facts == [
        "小王上周六（2023年5月6日）去了动物收容所，领养了一只猫，叫咪咪，特别可爱。",
        "小李下周三（2023年5月17日）要去北京出差，和张伟一起见客户。",
        "小王喜欢喝咖啡，不喜欢喝茶。",
        "小李的妹妹在上海工作，她下个月（2023年6月）结婚。"]
    assert memory.summary == "".join(memory.key_facts)
    assert memory.sentiment == "positive"
    li, wang, named = memory.persona_summary.split("；")
    assert li.startswith("小李谈到") and "北京" in li and wang.startswith("小王谈到") and "收容所" in wang
    assert named == "还提到张伟。"


def test_first_person_becomes_the_speaker(rules):
    memory = rules.summarize([
        Turn("Melanie", "What did you do this weekend?", SAID_AT),
        Turn("Caroline", "I adopted a cat and my sister came along to help me choose her at the shelter.", SAID_AT),
        Turn("小李", "你周末做了什么？", SAID_AT),
        Turn("小王", "我养了一只猫，我的朋友送了我一个猫爬架。", SAID_AT)], SummarizerConfig())
    assert memory.key_facts == [
        "Caroline adopted a cat and Caroline's sister came along to help Caroline choose her at the shelter.",
        "小王养了一只猫，小王的朋友送了小王一个猫爬架。"]


def test_you_is_the_other_speaker_and_verbs_agree(rules):
    memory = rules.summarize([
        Turn("Jon", "How is the new job going?", SAID_AT),
        Turn("Gina", "I really love it. I go to the studio every morning, and you told me I should try teaching, "
                     "so I do two classes a week now.", SAID_AT)], SummarizerConfig())
    assert memory.key_facts == ["Gina really loves it.", "Gina goes to the studio every morning, and Jon told Gina "
                                "Gina should try teaching, so Gina does two classes a week now."]
    assert [third_person(v) for v in ("love", "go", "try", "watch", "went", "can", "am", "have")] == \
        ["loves", "goes", "tries", "watches", "went", "can", "is", "has"]


def test_past_events_are_dated_against_each_turns_time(rules):
    turns = [Turn("Ann", "Did anything happen?", datetime(2023, 7, 3, 9, 0)),
             Turn("Bob", "I ran my first marathon yesterday and I finished it in four hours, which I never "
                         "thought I could do.", None),  # no time of its own: the latest one before it
             Turn("Ann", "Anything else since we met?", datetime(2023, 8, 20, 9, 0)),
             Turn("Bob", "Three weeks ago I started a new job at the bakery on Main Street and I love the "
                         "early mornings there.", datetime(2023, 8, 20, 9, 0))]
    facts = rules.summarize(turns, SummarizerConfig()).key_facts
    assert facts == [
        "Bob ran Bob's first marathon yesterday (2 July 2023) and Bob finished it in four hours, which Bob never "
        "thought Bob could do.",
        "Three weeks ago (the week of 24 July 2023) Bob started a new job at the bakery on Main Street and Bob "
        "loves the early mornings there."]


def test_small_talk_only(rules):
    memory = summarize(rules, "Ann: Hi Bob! How are you?\nBob: Good, thanks! You?\nAnn: Great! Talk soon!\nBob: Bye!")
    assert memory.key_facts == []
    assert memory.summary == "Ann and Bob made small talk."
    assert memory.importance <= 0.15
    chinese = summarize(rules, "小李：你好！最近好吗？\n小王：哈哈，挺好的，谢谢！\n小李：好的，再见！")
    assert chinese.key_facts == [] and chinese.summary == "小李和小王闲聊了几句。"


def test_importance_follows_what_was_said(rules):
    chat = summarize(rules, "Ann: Hi Bob! How are you?\nBob: Good, thanks! You?\nAnn: Great! Talk soon!")
    plans = summarize(rules, ENGLISH)
    life_event = summarize(rules, "Ann: How are you holding up?\nBob: My grandmother passed away last week and "
                                  "I was in the hospital with her until the end. I'm devastated and I miss her.")
    assert 0 <= chat.importance < plans.importance <= 1
    assert chat.importance < life_event.importance <= 1


def test_sentiment_with_negation(rules):
    sad = summarize(rules, "Ann: How are you holding up?\nBob: My grandmother passed away last week and I was in "
                           "the hospital with her until the end. I'm devastated and I miss her.")
    assert sad.sentiment == "negative"
    negated = summarize(rules, "Ann: How was the trip?\nBob: It was not good at all, I was not happy with the "
                               "hotel and the food was not great either.")
    assert negated.sentiment == "negative"
    flat = summarize(rules, "Ann: Where is the meeting?\nBob: The meeting is in room four at ten.")
    assert flat.sentiment == "neutral"
    chinese = summarize(rules, "小李：旅行怎么样？\n小王：我一点也不开心，酒店很糟糕，下雨了，好累。")
    assert chinese.sentiment == "negative"


def test_summary_budget_and_fact_limit(rules):
    first, second = summarize(rules, ENGLISH, max_key_facts=2).key_facts
    budget = len(first) + len(second)  # one short of both with the space between them
    memory = summarize(rules, ENGLISH, summary_chars=budget, max_key_facts=2)
    assert memory.key_facts == [first, second]
    assert len(memory.summary) <= budget and memory.summary == first
    # Valid for memorize as it is.
    assert memory.trimmed() == memory


def test_deterministic(rules):
    first = summarize(rules, ENGLISH)
    again = summarize(rules, ENGLISH)
    fresh = summarize(RulesSummarizer(AtomRules.load(), Segmenter(TextConfig())), ENGLISH)
    assert first == again == fresh
    assert summarize(rules, CHINESE) == summarize(rules, CHINESE)


ANCHOR = datetime(2023, 5, 8, 13, 56)  # a Monday


@pytest.mark.parametrize("text, past, expected", [
    ("I went to a support group yesterday", True, [("yesterday", "7 May 2023")]),
    ("I'm going to Paris next Friday", False, [("next Friday", "19 May 2023")]),
    ("we met last Saturday", True, [("last Saturday", "6 May 2023")]),
    ("I painted it last year", True, [("last year", "2022")]),
    ("I was there in May", True, [("in May", "May 2023")]),
    ("we went in June", True, [("in June", "June 2022")]),
    ("we go in June", False, [("in June", "June 2023")]),
    ("two weeks ago", True, [("two weeks ago", "the week of 24 April 2023")]),
    ("on Friday we went out", True, [("on Friday", "5 May 2023")]),
    ("on Friday we will go out", False, [("on Friday", "12 May 2023")]),
    ("last weekend", True, [("last weekend", "the weekend of 6 May 2023")]),
    ("back on March 3", True, [("March 3", "3 March 2023")]),
    ("I swim every Tuesday", True, []),
    ("I may go", False, []),
    ("我上周六去了公园", True, [("上周六", "2023年5月6日")]),
    ("三个月前我搬家了", True, [("三个月前", "2023年2月")]),
    ("我十二月要去", False, [("十二月", "2023年12月")]),
    ("昨天和前天", True, [("昨天", "2023年5月7日"), ("前天", "2023年5月6日")]),
    ("去年夏天", True, [("去年", "2022年")]),
    ("下个月", False, [("下个月", "2023年6月")]),
    ("我每周三游泳", True, []),
])
def test_date_mentions(text, past, expected):
    chinese = any("\u4e00" <= c <= "\u9fff" for c in text)
    found = [(m.text, m.label(chinese=chinese)) for m in date_mentions(text, ANCHOR, past=past)]
    assert found == expected


def test_a_short_exchange_keeps_its_stated_facts(rules):
    """A host may hand over two turns: far shorter than the sessions the weights were chosen on,
    so a typed first-person statement is a fact by itself (it used to give no fact at all)."""
    memory = summarize(rules, "Alice: I adopted a cat named Luna last week, she is grey.\n"
                              "Bob: Lovely! I am moving to Berlin next month for work.")
    assert len(memory.key_facts) == 2
    assert memory.key_facts[0].startswith("Alice adopted a cat named Luna")
    assert memory.key_facts[1].startswith("Bob is moving to Berlin")


def test_discourse_openers_leave_the_fact(rules):
    memory = summarize(rules, "Alice: Also, I adopted a grey cat named Luna last week.\n"
                              "Bob: Anyway, I am moving to Berlin next month for work.")
    assert [f.split()[0] for f in memory.key_facts] == ["Alice", "Bob"]
    chinese = summarize(rules, "小李：对了，我下个月要搬到成都工作。\n小王：另外，我最近开始学游泳了，每周去两次。")
    assert chinese.key_facts and not any(f.startswith(("对了", "另外")) or "对了" in f[:6] or "另外" in f[:6]
                                         for f in chinese.key_facts)


def test_one_key_fact_per_stated_fact(rules):
    """Two facts said in one turn are two key facts; a sentence that only goes on from the one
    before ("She is so tiny!") stays with it."""
    memory = summarize(rules, "Ann: What have you been up to?\n"
                              "Bob: I love hiking. I ran my first marathon in May. I adopted a puppy last week. "
                              "She is so tiny!")
    assert memory.key_facts == ["Bob loves hiking.", "Bob ran Bob's first marathon in May (May 2023).",
                                "Bob adopted a puppy last week (the week of 1 May 2023). She is so tiny!"]
    chinese = summarize(rules, "小李：周末干嘛了？\n小王：我去动物园看了大熊猫。我最近开始学游泳了，每周去两次。")
    assert chinese.key_facts == ["小王去动物园看了大熊猫。", "小王最近开始学游泳了，每周去两次。"]


def test_openers_leave_the_start_of_a_fact(rules):
    """Discourse openers go from the start of a fact; the same words stay where they are part of
    what was said ("So many", "还有三天")."""
    memory = summarize(rules, "Ann: How are things?\n"
                              "Bob: So, I started a new job at the bakery. Well, I am moving to Berlin next month. "
                              "Oh, I love hiking. By the way, my brother Tom is visiting. Actually I sold my car.\n"
                              "Ann: So many friends came to my birthday party last Saturday.")
    assert [f.split()[0] for f in memory.key_facts] == ["Bob", "Bob", "Bob", "Bob's", "Bob", "So"]
    assert memory.key_facts[-1].startswith("So many friends came to Ann's birthday party")
    chinese = summarize(rules, "小李：最近怎么样？\n"
                               "小王：还有，我换了新工作。然后我搬到了成都。话说我最近在学日语。其实我养了一只猫。\n"
                               "小李：还有三天我就要毕业了。")
    assert chinese.key_facts == ["小王换了新工作。", "小王搬到了成都。", "小王最近在学日语。", "小王养了一只猫。",
                                 "还有三天小李就要毕业了。"]


def test_what_a_person_says_of_themself_is_kept(rules):
    """In a Chinese chat a first-person statement is a fact whatever the atom rules make of it
    (learning to swim, twice a week, is none of their types); agreeing and opinions on what was
    just said are not facts."""
    memory = summarize(rules, "小李：你最近在忙什么？\n小王：我最近开始学游泳了，每周去两次。\n"
                              "小李：我觉得挺好的。我也是。\n小王：我每天早上六点起床跑步。")
    assert memory.key_facts == ["小王最近开始学游泳了，每周去两次。", "小王每天早上六点起床跑步。"]


def test_only_people_are_participants(rules):
    """A panda, a pet and a city are named but are not participants; the people named are."""
    chinese = summarize(rules, "小李：周末干嘛了？\n小王：我和张伟去动物园看了熊猫，熊猫特别可爱。\n"
                               "小李：我带我家的狗去了杭州。")
    assert chinese.participants == ["小李", "小王", "张伟"]
    english = summarize(rules, "Ann: What did you do on the weekend?\n"
                               "Bob: I took my dog Max to the beach in Portland.\n"
                               "Ann: I visited Chicago with Tom and Sarah last month.")
    assert english.participants == ["Ann", "Bob", "Tom", "Sarah"]
