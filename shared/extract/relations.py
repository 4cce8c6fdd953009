"""Typed relations between the entities of a sentence, by rules (English and Chinese).

Each entity mention (shared/extract/entities.py) and each self word (I, my, 我, 我的) is first
replaced by a placeholder, ⟦0⟧, ⟦1⟧ … and ⟦S⟧; the patterns below then read sentences shaped
like "⟦S⟧ sister ⟦0⟧" (my sister Emma), "⟦0⟧ is engaged to ⟦1⟧", "⟦0⟧的丈夫⟦1⟧" (王芳的丈夫李强),
"⟦0⟧和⟦1⟧是夫妻", "⟦S⟧家的猫叫团子". The relation words come from the vocabulary
(shared/resources/relations.yaml), so a new word is data, not code.
A relation (A, r, B) reads "B is A's r"; the object of some relations is typed by them (a pet
is "other", an employer an organisation, a home a place).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from shared.extract.entities import PERSON, EntityFinder, Mention, self_spans
from shared.extract.relation_words import RelationVocabulary, vocabulary

SELF = "⟦S⟧"
_SLOT = r"⟦(?:D?\d+|S)⟧"
_E = rf"(?P<a>{_SLOT})"
_E2 = rf"(?P<b>{_SLOT})"


@dataclass(frozen=True)
class Relation:
    """B is A's relation. A and B are mentions, or None for the self."""

    subject: Mention | None
    relation: str
    object: Mention | None
    confidence: float


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern
    relation: str | None     # fixed relation, else the word in group r (or a pair word in p)
    confidence: float
    swap: bool = False       # the pattern's b is the subject ("⟦0⟧ is ⟦S⟧ sister")


def _rules_en(v: RelationVocabulary) -> list[_Rule]:
    r = rf"(?P<r>{v.words_pattern('en')})"
    pairs = "|".join(re.escape(p) for p in sorted(v.pairs_en, key=len, reverse=True))
    poss = r"(?:['’]s)?\s+"
    job = r"(?:an?\s+|the\s+)?[\w\s-]{1,30}?\s+"
    be = r"(?:\s*['’](?:m|s|re)|\s+(?:is|am|are|was|were))"
    rules = [
        (rf"{_E}{poss}(?:own\s+|new\s+|older\s+|younger\s+|little\s+|big\s+)?{r},?\s+"
         rf"(?:named\s+|called\s+)?{_E2}", None, 0.9, False),
        (rf"{_E}\s+(?:have|has|had|got|adopted)\s+(?:a|an)\s+(?:\w+\s+)?{r}\s+"
         rf"(?:named|called)\s+{_E2}", None, 0.85, False),
        (rf"{_E}{poss}{r}\s+(?:is|was)\s+(?:called\s+|named\s+)?{_E2}", None, 0.85, False),
        (rf"{_E2},?\s+(?:is|was|'s)\s+{_E}{poss}{r}\b", None, 0.85, False),
        (rf"{_E2},\s+{_E}{poss}{r}\b", None, 0.8, False),
        (rf"{_E}\s+(?:is|was|got|'s|has been|are|were)\s+(?:now\s+|recently\s+|just\s+)?"
         rf"engaged\s+to\s+{_E2}", "fiance", 0.9, False),
        (rf"{_E}\s+(?:is|was|got|'s|has been)\s+(?:now\s+|recently\s+|just\s+)?"
         rf"married\s+to\s+{_E2}", "spouse", 0.9, False),
        (rf"{_E}\s+(?:married|wed)\s+{_E2}", "spouse", 0.85, False),
        (rf"{_E}\s+(?:is|was|has been|'s)\s+(?:now\s+)?(?:dating|seeing|going out with)\s+{_E2}",
         "partner", 0.8, False),
        (rf"{_E}\s+and\s+{_E2}\s+(?:are|were|got|have been|'re)\s+(?:now\s+|just\s+|recently\s+)?"
         rf"(?P<p>{pairs})\b", None, 0.85, False),
        (rf"{_E}\s+(?:works?|worked|working|is working|has worked|'s working)\s+"
         rf"(?:as\s+{job})?(?:at|for)\s+{_E2}", "works_at", 0.85, False),
        (rf"{_E}{be}\s+{job}(?:at|for)\s+{_E2}", "works_at", 0.75, False),
        (rf"{_E}\s+(?:joined|got a job at|started working at|was hired by|works for)\s+{_E2}", "works_at", 0.8, False),
        (rf"{_E}\s+(?:studies|studied|is studying|goes to school at|attends|attended)\s+"
         rf"(?:\w+\s+)?(?:at\s+)?{_E2}", "studies_at", 0.75, False),
        (rf"{_E}\s+(?:lives?|lived|living|has lived|now lives|is living|are living)\s+in\s+{_E2}",
         "lives_in", 0.85, False),
        (rf"{_E}\s+(?:moved|have moved|has moved|am moving|is moving|relocated)\s+to\s+{_E2}", "lives_in", 0.75, False),
        (rf"{_E}(?:{be}|\s+(?:comes?|came))\s+(?:originally\s+)?from\s+{_E2}", "comes_from", 0.8, False),
        (rf"{_E}\s+grew\s+up\s+in\s+{_E2}", "comes_from", 0.8, False),
    ]
    return [_Rule(re.compile(p, re.I), rel, conf, swap) for p, rel, conf, swap in rules]


def _rules_zh(v: RelationVocabulary) -> list[_Rule]:
    r = rf"(?P<r>{v.words_pattern('zh')})"
    pairs = "|".join(re.escape(p) for p in sorted(v.pairs_zh, key=len, reverse=True))
    now = r"(?:现在|目前|一直|也|还)?"
    rules = [
        (rf"{_E}(?:的)?(?:家的?)?{r}(?:叫|是|名叫|叫做)?{_E2}", None, 0.9, False),
        (rf"{_E2}(?:就)?是{_E}(?:的)?{r}", None, 0.85, False),
        # 同事小张来自杭州: a relation word opening a clause, a name after it, is the speaker's.
        (rf"(?:^|[，,。；;！!])\s*{r}{_E2}", None, 0.6, False),
        (rf"{_E}(?:和|跟|与){_E2}(?:是|成了|成为了?)(?P<p>{pairs})", None, 0.85, False),
        (rf"{_E}嫁给了?{_E2}", "husband", 0.85, False),
        (rf"{_E}娶了{_E2}", "wife", 0.85, False),
        (rf"{_E}(?:和|跟|与){_E2}(?:已经)?(?:结婚|成婚|成家)", "spouse", 0.85, False),
        (rf"{_E}(?:和|跟|与){_E2}(?:已经)?订婚", "fiance", 0.85, False),
        (rf"{_E}(?:和|跟|与){_E2}(?:在)?(?:谈恋爱|交往|恋爱)", "partner", 0.8, False),
        (rf"{_E}{now}在{_E2}(?:工作|上班|实习|任职|打工)", "works_at", 0.8, False),
        (rf"{_E}{now}在{_E2}(?:读书|上学|念书|读研|读博|学习)", "studies_at", 0.75, False),
        (rf"{_E}{now}(?:住在|定居在?|生活在){_E2}", "lives_in", 0.85, False),
        (rf"{_E}{now}(?:搬到|搬去)了?{_E2}", "lives_in", 0.75, False),
        (rf"{_E}{now}(?:来自|出生在|出生于|老家在|老家是){_E2}", "comes_from", 0.8, False),
    ]
    return [_Rule(re.compile(p), rel, conf, swap) for p, rel, conf, swap in rules]


@lru_cache(maxsize=1)
def _rules() -> tuple[list[_Rule], re.Pattern]:
    v = vocabulary()
    pets = "|".join(re.escape(w) for k in v.kinds.values() if k.key == "pet" for w in k.words_zh)
    # 我家的猫叫团子: a pet's name is rarely a name jieba knows, so it is read from the text.
    named_pet = re.compile(rf"{_E}(?:的)?(?:家)?(?:的)?(?P<r>{pets})(?:叫|名叫|叫做)(?P<name>[\u4e00-\u9fff]{{1,3}}?)"
                           r"(?=[，。,.！!？?；;\s]|今年|已经|特别|很|非常|$)")
    return _rules_en(v) + _rules_zh(v), named_pet


def find_relations(sentence: str, mentions: Sequence[Mention], self_name: str | None = None) -> list[Relation]:
    """The relations a sentence states between its mentions and the self, and between them
    and the people it describes without naming ("王磊的姐姐嫁给了张伟": the sister is a node of
    her own, "王磊的姐姐", so a question can go from 王磊 through her to 张伟)."""
    masked, slots = _masked(sentence, mentions)
    found: dict[tuple, Relation] = {}
    _apply(masked, slots, found)
    described, slots, descriptions = _described(masked, slots, self_name)
    said = {(_ident(r.subject), r.relation) for r in found.values()}
    if descriptions:
        before = set(found)
        _apply(described, slots, found)
        used = {_ident(r.subject) for k, r in found.items() if k not in before}
        used |= {_ident(r.object) for k, r in found.items() if k not in before}
        for relation in descriptions:
            if (_ident(relation.subject), relation.relation) not in said or _ident(relation.object) in used:
                _add(found, relation)
    return list(found.values())


@lru_cache(maxsize=1)
def _description_pattern() -> re.Pattern:
    """A slot followed by a relation word; built once (an alternation of every relation
    word, escaped: rebuilding it for each sentence was most of a long transcript's time)."""
    v = vocabulary()
    words = f"{v.words_pattern('en')}|{v.words_pattern('zh')}"
    return re.compile(rf"(?P<a>{_SLOT})(?P<join>['’]s\s+|\s+|的)?(?P<r>{words})(?![A-Za-z-])", re.I)


def _described(masked: str, slots: dict, self_name: str | None) -> tuple[str, dict, list[Relation]]:
    """The masked text with each "⟦a⟧'s sister" / "⟦S⟧ sister" / "⟦a⟧的姐姐" as a slot of its
    own; the relations that define those slots. The self is named self_name (a speaker), else
    "the user" / 我."""
    v, pattern = vocabulary(), _description_pattern()
    slots, relations, out, position = dict(slots), [], [], 0
    for m in pattern.finditer(masked):
        owner, key = slots.get(m.group("a")), v.kind_of_word(m.group("r"))
        chinese = not m.group("r").isascii()
        if key is None or ((m.group("join") or "").strip() == "" and not chinese and m.group("a") != SELF):
            continue
        owner_name = owner.name if owner else self_name or ("我" if chinese else "the user")
        name = f"{owner_name}的{m.group('r')}" if chinese else f"{owner_name}'s {m.group('r').lower()}"
        start = owner.start if owner else 0
        mention = _typed(Mention(name, "person", start, start + len(name)), key, v)
        mark = f"⟦D{len(relations)}⟧"
        slots[mark] = mention
        relations.append(Relation(owner, key, mention, 0.7))
        out += [masked[position:m.start()], mark]
        position = m.end()
    out.append(masked[position:])
    return "".join(out), slots, relations


def _apply(masked: str, slots: dict, found: dict) -> None:
    v = vocabulary()
    rules, named_pet = _rules()
    for rule in rules:
        for m in rule.pattern.finditer(masked):
            a, b = slots.get(m.groupdict().get("a") or SELF), slots.get(m.group("b"))
            key = rule.relation or _named(m, v)
            if key is None or m.groupdict().get("a") == m.group("b"):
                continue
            subject, obj = (b, a) if rule.swap else (a, b)
            _add(found, Relation(subject, key, _typed(obj, key, v), rule.confidence))
    for m in named_pet.finditer(masked):
        name = m.group("name")
        _add(found, Relation(slots.get(m.group("a")), "pet", Mention(name, "other", 0, len(name)), 0.85))


def _named(m: re.Match, v: RelationVocabulary) -> str | None:
    groups = m.groupdict()
    if groups.get("r"):
        return v.kind_of_word(groups["r"].strip())
    if groups.get("p"):
        word = groups["p"].strip()
        return v.pairs_en.get(word.lower()) or v.pairs_zh.get(word)
    return None


def _typed(obj: Mention | None, key: str, v: RelationVocabulary) -> Mention | None:
    """The object as the relation says it is (a pet is "other", an employer an organisation)."""
    object_type = v.kinds[key].object_type
    if obj is None or object_type is None or obj.type == object_type:
        return obj
    return Mention(obj.name, object_type, obj.start, obj.end)


def _add(found: dict, relation: Relation) -> None:
    ident = (_ident(relation.subject), relation.relation, _ident(relation.object))
    if ident not in found or found[ident].confidence < relation.confidence:
        found[ident] = relation


def _ident(mention: Mention | None) -> str:
    return SELF if mention is None else mention.name.casefold()


def _masked(sentence: str, mentions: Sequence[Mention]) -> tuple[str, dict[str, Mention | None]]:
    """The sentence with mentions as ⟦i⟧ and self words as ⟦S⟧; {placeholder: mention}."""
    spans = [(m.start, m.end, f"⟦{i}⟧", m) for i, m in enumerate(mentions)]
    spans += [(s, e, SELF, None) for s, e in self_spans(sentence)
              if not any(s < m.end and m.start < e for m in mentions)]
    out: list[str] = []
    slots: dict[str, Mention | None] = {SELF: None}
    position = 0
    for start, end, mark, mention in sorted(spans, key=lambda x: x[0]):
        if start < position:
            continue
        out += [sentence[position:start], mark]
        slots[mark] = mention
        position = end
    out.append(sentence[position:])
    return "".join(out), slots


def people_named(finder: EntityFinder, text: str) -> list[str]:
    """The people a text names, as what it says of them types them: "my dog Max" is a pet,
    "works at Acme" an employer, whatever the names look like."""
    mentions = finder.mentions(text)
    retyped = {r.object.name: r.object.type for r in find_relations(text, mentions) if r.object}
    return [m.name for m in mentions if retyped.get(m.name, m.type) == PERSON]
