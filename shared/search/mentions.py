"""Whom a question is about, and whether the store mentions them at all.

"What's my sister's job?" asked of a store that never mentions a sister has no answer, however
near "my brother works as a sound engineer" comes by meaning: the question names its subject,
and no memory, in either language, speaks of it. So recall reads the people a question asks
about and answers nothing when the store in scope mentions none of them:
- a kinship or social word about the user or someone ("my sister", 我女儿, "Ivy's father"):
  mentioned by any of its words, English or Chinese, in shared/resources/relations.yaml, by
  its family's own word (a daughter by "kids", 孩子; a wife by "partner"), by every word of the
  family when it is the family's own word (a sister by 姐姐, 妹妹, "big sister"), and by the
  spoken forms 我妈, 我爸 of a doubled word (妈妈, 爸爸);
- a name the question asks about: capitalised and possessive ("Jordan's birthday") or the
  subject after an auxiliary ("what does Jordan drink", "when did Caroline go"), so that a
  capitalised common word ("my Chinese class") is not taken for one.
Pets, employers and places are not people here: "my dog" is answered by "our beagle", which
no word of the pet family mentions. A question that names nobody is left to the question-level
model (calibration.answerable).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from functools import lru_cache

from shared.extract.relation_words import vocabulary

_AUXILIARY = r"(?:is|are|was|were|do|does|did|has|have|had|will|would|can|could|should)"
_NAME = r"(?-i:[A-Z][a-z]+)"
_ASKED_NAME = re.compile(rf"\b{_AUXILIARY}\s+(?P<after>{_NAME})\b|\b(?P<owner>{_NAME})['’]s\b", re.I)


@lru_cache(maxsize=1)
def _kin() -> tuple[dict[str, frozenset[str]], re.Pattern[str], re.Pattern[str]]:
    """({a kinship word, casefolded: every word of its family}, the English and the Chinese
    pattern of the kinship words, longest first)."""
    words = vocabulary()
    people = {key: kind for key, kind in words.kinds.items() if kind.object_type is None}
    family_words: dict[str, frozenset[str]] = {}
    for kind in people.values():
        generic = people.get(kind.family)  # the family's own word: sister, parent, partner
        if kind is generic:
            reach = [people[k] for k in words.asked_for(kind.key) if k in people]
        else:
            reach = [kind] + ([generic] if generic is not None else [])
        spoken = {w for k in reach for w in k.words_en + k.words_zh}
        spoken |= {f"我{w[0]}" for w in spoken if len(w) == 2 and w[0] == w[1]}  # 妈妈 -> 我妈
        for word in kind.words_en + kind.words_zh:
            family_words[word.casefold()] = frozenset(spoken)
    en = sorted({w for k in people.values() for w in k.words_en}, key=len, reverse=True)
    zh = sorted({w for k in people.values() for w in k.words_zh}, key=len, reverse=True)
    return (family_words, re.compile(r"\b(?:" + "|".join(map(re.escape, en)) + r")\b", re.I),
            re.compile("|".join(map(re.escape, zh))))


def asked_people(question: str) -> list[frozenset[str]]:
    """The people a question asks about, each as the words any of which would mention them."""
    family_words, english, chinese = _kin()
    people = [family_words[m.group(0).casefold()] for m in english.finditer(question)]
    people += [family_words[m.group(0)] for m in chinese.finditer(question)]
    for match in _ASKED_NAME.finditer(question):
        name = match.group("after") or match.group("owner")
        if name.casefold() not in family_words:  # a question word ("What's") has no terms
            people.append(frozenset({name}))
    return people


def none_mentioned(people: Iterable[AbstractSet[str]], mentioned: Callable[[AbstractSet[str]], bool]) -> bool:
    """Whether the question names people and the store mentions none of them (mentioned:
    whether any memory in scope holds any of a person's words)."""
    people = list(people)
    return bool(people) and not any(mentioned(words) for words in people)
