"""Whose a fact is, and what a statement of change replaces.

The rules on families of phrasings in both languages (shared/extract/subjects.py, the slots of
atom_rules.yaml); the atoms a memory gets; superseding through the atoms stage; and whose a
transcript's statements are.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from shared.config import AtomsConfig, SummarizerConfig, TextConfig
from shared.extract.atomize import AtomRules, draft_atoms
from shared.extract.subjects import ASSISTANT, SELF, fact_subject, subjects_of
from shared.store.model.documents import Document, MemoryFields
from shared.summarize.conversation import Turn
from shared.summarize.rules import RulesSummarizer
from shared.summarize.transcripts import memory_fields
from shared.text.segment import Segmenter


@pytest.fixture(scope="module")
def rules() -> AtomRules:
    return AtomRules.load(None)


@pytest.mark.parametrize("fact, subject", [
    # a kinship word after "my", with the name after it or before it, or alone
    ("My wife Sarah loves orchids.", "Sarah (wife)"),
    ("My husband, Tom, hates cilantro.", "Tom (husband)"),
    ("Our daughter Mia is allergic to cats.", "Mia (daughter)"),
    ("Jordan, my partner, only drinks tea.", "Jordan (partner)"),
    ("My mom prefers roses over tulips.", "mom"),
    ("My best friend collects vinyl records.", "best friend"),
    ("My boss Priya plays golf on Saturdays.", "Priya (boss)"),
    ("Last week my brother Ken bought a boat.", "Ken (brother)"),
    ("Mom's birthday is in June.", "mom"),
    ("Grandpa loves fishing.", "grandpa"),
    # a name opening the sentence
    ("Priya plays golf every Saturday.", "Priya"),
    ("Liam is moving to Dublin next month.", "Liam"),
    # the user: first person, or nothing said of anyone
    ("I love hiking in the mountains.", SELF),
    ("We finally moved from Toronto to Vancouver.", SELF),
    ("Started my new job at Contoso this week.", SELF),
    ("I bought my mom flowers.", SELF),
    ("Python is my favourite language.", SELF),
    ("Dentist appointment next Tuesday at 3pm.", SELF),
    # Chinese: 我(的) + kinship word, with or without a name; a name opening the sentence
    ("我老婆最喜欢向日葵。", "老婆"),
    ("我妈喜欢玫瑰，不喜欢郁金香。", "妈"),
    ("我的同事老周特别能喝酒。", "老周 (同事)"),
    ("同事老周是江西人。", "老周 (同事)"),
    ("我女儿小美在学钢琴。", "小美 (女儿)"),
    ("张伟下个月要跳槽到腾讯。", "张伟"),
    ("王小明是大学老师。", "王小明"),
    ("小李明天去上海出差。", "小李"),
    ("我不太能吃辣。", SELF),
    ("上个月我们从杭州搬到了苏州。", SELF),
    ("周末去爬山。", SELF),
    ("我和我姐去看了电影。", SELF),
])
def test_a_fact_has_the_subject_it_states(fact, subject):
    assert fact_subject(fact) == subject


@pytest.mark.parametrize("facts, subjects", [
    (["My sister Anna moved to Lyon.", "She loves cheese."], ["Anna (sister)", "Anna (sister)"]),
    (["Tom is my neighbour.", "He plays the cello."], ["Tom (neighbour)", "Tom (neighbour)"]),
    (["我妈喜欢玫瑰。", "她不喜欢郁金香。"], ["妈", "妈"]),
    (["同事老周是江西人。", "他特别能喝酒。"], ["老周 (同事)", "老周 (同事)"]),
    # a pronoun with nobody before it is someone, not the user
    (["She loves orchids."], ["she"]),
    (["I love tea.", "She loves coffee."], [SELF, "she"]),
])
def test_a_pronoun_refers_back_to_the_person_named_before_it(facts, subjects):
    assert subjects_of(facts) == subjects


def test_a_speaker_is_the_subject_of_their_own_first_person():
    assert fact_subject("I love hiking.", "Caroline") == "Caroline"
    assert fact_subject("My wife Sarah loves orchids.", "Caroline") == "Sarah (wife)"
    # a transcript's roles: the user is the self, the assistant no person
    assert fact_subject("I prefer tabs.", "user") == SELF
    assert fact_subject("user prefers green tea over coffee.") == SELF
    assert fact_subject("I suggest a checklist.", "assistant") == ASSISTANT
    assert fact_subject("assistant: Noted, green tea it is.") == ASSISTANT


@pytest.mark.parametrize("fact, slot", [
    ("I live in Toronto.", ("lives_in", "toronto")),
    ("We live in Lyon now.", ("lives_in", "lyon")),
    ("We finally moved from Toronto to Vancouver last week.", ("lives_in", "vancouver")),
    ("Last month, we moved to Lyon.", ("lives_in", "lyon")),
    ("I have moved to Berlin from Munich.", ("lives_in", "berlin")),
    ("I work as a data analyst at Northwind Insurance.", ("works_at", "northwind insurance")),
    ("Started my new job as a product manager at Contoso this week.", ("works_at", "contoso")),
    ("I just joined Google.", ("works_at", "google")),
    ("I left Northwind for Contoso.", ("works_at", "contoso")),
    ("I drive a 2015 Honda Civic.", ("car", "2015 honda civic")),
    ("Sold my old car and bought a Tesla Model 3 last month.", ("car", "tesla model 3")),
    ("We traded it in for a Subaru Outback.", ("car", "subaru outback")),
    ("我们家住在杭州滨江区。", ("lives_in", "杭州滨江区")),
    ("我住在北京", ("lives_in", "北京")),
    ("上个月我们从杭州搬到了苏州工业园区。", ("lives_in", "苏州工业园区")),
    ("我已经搬到上海了", ("lives_in", "上海了")),
    ("我在阿里巴巴上班。", ("works_at", "阿里巴巴")),
    ("我跳槽到字节跳动了。", ("works_at", "字节跳动")),
    ("我辞职了，下个月去美团上班。", ("works_at", "美团")),
    ("我开一辆本田雅阁。", ("car", "本田")),
    ("我把旧车卖了，换了一辆特斯拉。", ("car", "特斯拉")),
    ("我们新买了一辆比亚迪。", ("car", "比亚迪")),
])
def test_statements_of_a_fact_and_of_its_change_give_the_same_attribute(rules, fact, slot):
    assert rules.slots_of(fact, None)[1:] == slot


@pytest.mark.parametrize("fact", ["I have two cats.", "I love Toronto in autumn.",
                                  "Sold my old car last week.", "我很喜欢苏州的园林。",
                                  "I just joined a book club for Python fans.", "The meeting moved to Friday.",
                                  "妈妈给我买了一辆新的自行车。", "我们坐火车去了南京。"])
def test_no_slot_where_nothing_replaceable_is_said(rules, fact):
    assert rules.slots_of(fact, None) is None


def drafts(text: str, rules: AtomRules):
    document = Document(1, text, "h", MemoryFields(original_time=datetime(2026, 3, 2, 9)), False, 0, None, 0.0, 0.0)
    return draft_atoms(document, rules, AtomsConfig())


def test_every_atom_of_a_memory_carries_its_subject(rules):
    atoms = drafts("My sister Anna moved to Lyon. She loves cheese. I prefer wine.", rules)
    assert [(a.subject, a.attribute, a.value) for a in atoms] == [
        ("Anna (sister)", "lives_in", "lyon"), ("Anna (sister)", None, None), (SELF, None, None)]
    # another person's move replaces their residence, never the user's
    assert drafts("张伟下个月要跳槽到腾讯。", rules)[0].subject == "张伟"


def test_a_transcripts_roles_are_no_participants_and_the_assistant_states_no_fact(rules):
    turns = [Turn("user", "I prefer green tea over coffee. I adopted a cat named Luna last week.", None),
             Turn("assistant", "I suggest you keep a checklist for the vet: vaccines, food and a carrier.", None),
             Turn("user", "I live in Lisbon with my husband Rui.", None)]
    memory = RulesSummarizer(rules, Segmenter(TextConfig())).summarize(turns, SummarizerConfig())
    fields = memory_fields(memory, turns, "me", None)
    assert not {"user", "assistant"} & set(fields.participants)
    assert fields.key_facts and not any("checklist" in f for f in fields.key_facts)
    assert {fact_subject(f) for f in fields.key_facts} == {SELF}
