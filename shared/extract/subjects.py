"""Whose a fact is: the user ("self") or the person the fact is stated of, by rules, in English
and Chinese. Zero model calls.

A fact's subject is the earliest person reference in it:
- a kinship or social word after "my" / 我(的), with the name that follows it or goes before it
  ("my wife Sarah", "Sarah, my wife", 我的同事老周, 同事老周) -> "Sarah (wife)", "老周 (同事)";
  without a name the word itself ("my mom" -> "mom", 我老婆 -> "老婆");
- a name that opens a sentence which does not also speak of the user ("Priya plays golf",
  张伟下个月跳槽, 老周是江西人);
- the first person (I, me, my, we, our; 我, 我们, 咱们) -> the memory's speaker when it has one
  ("Name: text"), else "self";
- a third-person pronoun (she, he, they, her, his; 她, 他) -> the other person named before it in
  the same memory ("My sister Anna moved to Lyon. She loves cheese." -> "Anna (sister)"), or the
  pronoun itself when nobody was (someone, not the user).
A fact with no person reference at all ("Dentist next Tuesday") is the speaker's, or the user's.
"""

from __future__ import annotations

import re
from functools import lru_cache

from shared.extract.entities import NOT_NAMES, entity_words
from shared.extract.relation_words import vocabulary
from shared.store.model.atoms import SELF_SUBJECT

SELF = SELF_SUBJECT
# The roles a transcript's speakers are written as (shared/summarize/transcripts.py
# CLAUDE_SPEAKERS): the user's words are the self's; the assistant is no person, and what it
# says (suggestions, checklists) is no fact about the user.
USER_WORDS = frozenset({"user", "the user", "human", "用户"})
ASSISTANT_WORDS = frozenset({"assistant", "the assistant", "助手"})
ASSISTANT = "assistant"
_ROLE_OPENING = re.compile(r"^(?:the\s+)?(?P<role>user|human|assistant|用户|助手)(?![\w-])\s*[:：]?", re.I)
# Kinship words that are not people (places, organisations) are left out of the person words.
_NOT_PEOPLE = ("organisation", "place")
# Words that open a sentence and start with a Chinese surname character without being a name.
_NOT_NAMES_ZH = re.compile(
    r"^(?:周[末一二三四五六日天]|周围|周年|明[天年早晚白]|高[兴铁速考中]|马上|黄金|方便|安排|"
    r"白天|钱包|金额|向[往日]|司机|林子|朱古力|关[于系注心门]|常常|时[候间]|于是|郑重|"
    r"王国|李子|杨树|陈述|程序|万一|包括|张开|曾经|许多|任何|任务|石头|江[边湖]|夏[天季]|"
    r"秋[天季]|冬[天季]|春[天季节]|方[面向法式]|宋体|毛[衣巾病]|文[件化章]|余下|严重|"
    r"连续|乔迁|华为|苏州|杭州|广州|成都|温州|常州|武汉|汪|叶子|田地|房[子间租贷])")
_ZH_AFTER_NAME = ("是在要说把和跟与的去下上今明昨后前最很特也都已刚会想喜爱不没从"
                  "搬换跳辞买卖打住做当，,。、每常平一总还就又")
# One-character kinship words, a person only after 我 / 我的 (我妈, 我姐).
_SHORT_KIN_ZH = "妈|爸|哥|姐|弟|妹|爷|奶"
_PRONOUN_EN = re.compile(r"\b(?:she|he|they|her|his|him|their|them)\b", re.I)
_PRONOUN_ZH = re.compile(r"(?<!其)(?:他们|她们|他|她)")
_SELF_EN = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself|we|we're|we've|we'll|our|ours|us)\b", re.I)
_EN_NAME = r"(?-i:[A-Z][a-z]+(?:[ -][A-Z][a-z]+)?)"
# Kinship words written like a name when they open a sentence ("Mom's birthday", "Grandpa loves").
_LEAD_FAMILIES = ("parent", "grandparent", "aunt_or_uncle")


@lru_cache(maxsize=1)
def _patterns() -> dict[str, re.Pattern]:
    words = vocabulary()
    people = [k for k in words.kinds.values() if k.object_type not in _NOT_PEOPLE]
    en = "|".join(re.escape(w) for w in sorted({w for k in people for w in k.words_en}, key=len, reverse=True))
    zh = "|".join(re.escape(w) for w in sorted({w for k in people for w in k.words_zh}, key=len, reverse=True))
    lead = "|".join(re.escape(w.capitalize()) for k in people if k.family in _LEAD_FAMILIES
                    for w in sorted(k.words_en, key=len, reverse=True))
    surnames = "".join(sorted(entity_words().surnames_zh))
    name_zh = (rf"(?:[老小阿][{surnames}]|[{surnames}][\u4e00-\u9fff]{{1,2}}(?=[{_ZH_AFTER_NAME}]))")
    # After a kinship word a pet name with 小 / 老 / 阿 is a name too (我女儿小美在…).
    kin_name_zh = rf"(?:{name_zh}|[老小阿][\u4e00-\u9fff](?=[{_ZH_AFTER_NAME}]))"
    return {
        # my wife Sarah / my wife, Sarah, / my mom
        "kin_en": re.compile(rf"\b(?:my|our)\s+(?P<kin>{en})\b(?:,?\s+(?P<name>{_EN_NAME})\b)?", re.I),
        # Sarah, my wife, / Sarah (my wife) / Tom is my neighbour
        "name_kin_en": re.compile(rf"^(?P<name>{_EN_NAME})(?:,|\s+is|\s+was|\s+\()?\s*(?:my|our)\s+(?P<kin>{en})\b",
                                  re.I),
        # Mom's birthday / Dad loves (a kinship word opening the sentence)
        "lead_kin_en": re.compile(rf"^(?P<kin>{lead})\b(?!\s+[A-Z])"),
        "name_en": re.compile(rf"^(?P<name>{_EN_NAME})(?:'s)?\s+(?=[a-z])"),
        "kin_zh": re.compile(rf"(?:我们?的?|咱们?的?)(?P<kin>{zh}|{_SHORT_KIN_ZH})(?P<name>{kin_name_zh})?"),
        "lead_kin_zh": re.compile(rf"^(?P<kin>{zh})(?P<name>{kin_name_zh})?"),
        "name_zh": re.compile(rf"^(?P<name>{name_zh})"),
        "self_zh": re.compile(rf"我们|咱们|我(?!的?(?:{zh}|{_SHORT_KIN_ZH}))"),
    }


# Words and phrases a sentence may open with before its subject: taken off before reading it.
_OPENING = re.compile(
    r"^(?:(?:also|and|but|so|well|oh|btw|by the way|actually|finally|recently|today|yesterday|"
    r"last (?:week|month|year|night)|this (?:week|month|year|morning)|now|anyway)\b[\s,]*"
    r"|(?:上个?月|上周|上星期|去年|今年|昨天|今天|前天|最近|刚刚|刚才|现在|后来|另外|对了|其实|终于|这周|本周)[，,\s]*)+",
    re.I)


def fact_subject(fact: str, speaker: str | None = None, previous: str | None = None) -> str:
    """The subject of one fact (module docstring). `previous`: the subject of the memory's
    fact before it, for a pronoun that refers back."""
    me = speaker_subject(speaker)
    text = _OPENING.sub("", fact.strip())
    role = _ROLE_OPENING.match(text)
    if role:
        return speaker_subject(role.group("role"))
    found = _earliest(text)
    if found is None:
        return me
    kind, value = found
    if kind == "self":
        return me
    if kind == "pronoun":
        return previous if previous and previous != me else value.lower()
    return value


def speaker_subject(speaker: str | None) -> str:
    """Whose a speaker's first person is: the user's own words and memories with no speaker
    are the self's; the assistant's are the assistant's; any other speaker is themself."""
    role = role_of(speaker)
    if speaker is None or role == SELF:
        return SELF
    return ASSISTANT if role == ASSISTANT else speaker.strip()


def role_of(name: str | None) -> str | None:
    """SELF for a name that is the user's role in a transcript, ASSISTANT for the assistant's,
    None for a person's name."""
    key = (name or "").strip().casefold()
    return SELF if key in USER_WORDS else ASSISTANT if key in ASSISTANT_WORDS else None


def subjects_of(facts: list[str], speaker: str | None = None) -> list[str]:
    """The subject of each of a memory's facts in order, a pronoun resolved to the person
    named before it."""
    subjects, previous = [], None
    for fact in facts:
        subject = fact_subject(fact, speaker, previous)
        subjects.append(subject)
        previous = subject
    return subjects


def _earliest(text: str) -> tuple[str, str] | None:
    """(kind, subject) of the earliest person reference: kind "person", "self" or "pronoun"."""
    p = _patterns()
    found: list[tuple[int, int, str, str]] = []  # (start, rank, kind, subject)
    for name in ("name_kin_en", "kin_en", "kin_zh", "lead_kin_zh", "lead_kin_en"):
        m = p[name].search(text)
        if m:
            found.append((m.start(), 0, "person", _named(m.group("kin"), m.groupdict().get("name"))))
    # A bare name opening a sentence that also speaks of the user ("Python is my favourite
    # language") may be a thing: the user is the surer subject then.
    if not (_SELF_EN.search(text) or p["self_zh"].search(text)):
        m = p["name_en"].match(text)
        if m and _is_name(m.group("name")):
            found.append((0, 1, "person", m.group("name")))
        m = p["name_zh"].match(text)
        if m and not _NOT_NAMES_ZH.match(text):
            found.append((0, 1, "person", m.group("name")))
    for kind, pattern in (("self", _SELF_EN), ("self", p["self_zh"]), ("pronoun", _PRONOUN_EN),
                          ("pronoun", _PRONOUN_ZH)):
        m = pattern.search(text)
        if m:
            found.append((m.start(), 2, kind, m.group(0)))
    if not found:
        return None
    _, _, kind, subject = min(found)
    return kind, subject


def _named(kin: str, name: str | None) -> str:
    kin = kin.lower() if kin.isascii() else kin
    return f"{name} ({kin})" if name and _is_name(name) else kin


def _is_name(name: str) -> bool:
    if not name.isascii():
        return True
    words = name.replace("-", " ").split()
    return bool(words) and not any(w in NOT_NAMES or w.lower() in _NOT_NAME_WORDS for w in words) \
        and not re.search(r"(?:ing|ed|ly|ness|tion)$", words[0])


# Capitalised words that open sentences without being names (beyond entities.NOT_NAMES).
_NOT_NAME_WORDS = frozenset("""started left sold bought moved got dentist doctor meeting dinner
lunch breakfast call pick need buy remember don't doesn't didn't allergic coffee tea work home
trip flight appointment gym class""".split())
