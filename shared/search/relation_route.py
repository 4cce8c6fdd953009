"""Following relations from a question: "Tomas's fiancée", "Mei's brother", "my sister",
"the manager of Ana", 王芳的丈夫, 我姐姐, and chains of two ("王磊的姐姐的丈夫", "Mei's brother's
wife") resolve, through the graph's relation edges, to the entities they mean.

A question's word asks for its relation's family ("partner" reaches husband, wife, fiancé(e),
boyfriend, girlfriend); an edge is followed forwards (A -r-> B: B is A's r) or backwards
through the inverse (B -r'-> A says A is B's r', so B is A's inverse(r')).
Also the entity names a question holds ("Acme Corp", "New York"), for the graph channel to
reach the memories about them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from shared.extract.entities import NOT_NAMES
from shared.extract.graph_rules import canonical
from shared.extract.relation_words import vocabulary
from shared.store.interface import Session
from shared.store.model.graph import SELF_CANONICAL

MAX_NAME_CHARS_ZH = 6
MAX_TARGETS = 20
_NAME_EN = r"(?<![A-Za-z0-9])[A-Z][A-Za-z0-9À-ÿ’'-]*(?:[ \t]+[A-Z][A-Za-z0-9À-ÿ’'-]*)*"
_SELF_ZH = ("我的", "我")


@dataclass(frozen=True)
class Chain:
    """An entity named in a question and the relations asked of it, in order."""

    names: tuple[str, ...]     # candidate canonical names of the entity, best first
    relations: tuple[str, ...]  # relation keys, one or two


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    v = vocabulary()
    en, zh = f"(?:{v.words_pattern('en')})", f"(?:{v.words_pattern('zh')})"
    # Names are told by their capital letter, so only the relation words ignore case.
    possessive = re.compile(
        rf"(?P<name>{_NAME_EN}|\b[Mm]y)(?:['’]s)?\s+(?P<r1>(?i:{en}))\b(?:['’]s\s+(?P<r2>(?i:{en}))\b)?")
    of_form = re.compile(rf"\b(?i:the)\s+(?P<r1>(?i:{en}))\s+of\s+(?P<name>{_NAME_EN})")
    chinese = re.compile(rf"(?P<r1>{zh})(?:的(?P<r2>{zh}))?")
    return possessive, of_form, chinese


def chains(question: str, aliases: dict[str, str]) -> list[Chain]:
    """The entity-and-relation chains a question asks about."""
    v = vocabulary()
    possessive, of_form, chinese = _patterns()
    found: list[Chain] = []
    for m in list(possessive.finditer(question)) + list(of_form.finditer(question)):
        name = re.sub(r"['’]s$", "", m.group("name"))
        if name.lower() != "my" and (name in NOT_NAMES or (name.split()[0] in NOT_NAMES and len(name.split()) == 1)):
            continue
        names = (SELF_CANONICAL,) if name.lower() == "my" else (canonical(name, aliases),)
        relations = [v.kind_of_word(w) for w in (m.group("r1"), m.groupdict().get("r2")) if w]
        found.append(Chain(names, tuple(r for r in relations if r)))
    for m in chinese.finditer(question):
        before = question[:m.start()]
        if before.endswith("的"):
            before = before[:-1]
        if not before or before.endswith(v.words("zh")):
            continue
        names = _chinese_names(before, aliases)
        relations = [v.kind_of_word(w) for w in (m.group("r1"), m.group("r2")) if w]
        found.append(Chain(names, tuple(r for r in relations if r)))
    return [c for c in found if c.names and c.relations]


def _chinese_names(before: str, aliases: dict[str, str]) -> tuple[str, ...]:
    """The text just before a relation word, as candidate names, longest first (王芳, 芳)."""
    if before.endswith(_SELF_ZH):
        return (SELF_CANONICAL,)
    tail = re.split(r"[，。！？、,.!?\s]", before)[-1][-MAX_NAME_CHARS_ZH:]
    return tuple(canonical(tail[i:], aliases) for i in range(len(tail) - 1))


def resolve(s: Session, chain: Chain, persona_id: str | None) -> list[tuple[int, float]]:
    """(node, confidence) of the entities a chain leads to."""
    named = s.graph.entity_nodes_named(list(chain.names), persona_id)
    none_named: list[int] = []
    start = next((named[n] for n in chain.names if n in named), none_named)
    frontier = [(node, 1.0) for node in start]
    v = vocabulary()
    for key in chain.relations:
        wanted = v.asked_for(key)
        backward = [k for k in v.kinds if v.inverse(k) in wanted]
        strength = dict(frontier)
        reached: dict[int, float] = {}
        for node, confidence in s.graph.related(list(strength), sorted(wanted), backward, MAX_TARGETS):
            reached[node] = max(reached.get(node, 0.0), confidence * max(strength.values()))
        frontier = sorted(reached.items(), key=lambda kv: -kv[1])[:MAX_TARGETS]
        if not frontier:
            return []
    return frontier


def named_entities(question: str, aliases: dict[str, str]) -> list[str]:
    """Canonical forms of the multi-word names a question holds ("Acme Corp", "New York"):
    single words reach their nodes as query terms already."""
    names: list[str] = []
    for m in re.finditer(_NAME_EN, question):
        words = [w for w in re.sub(r"['’]s$", "", m.group(0)).split() if w not in NOT_NAMES]
        if len(words) > 1:
            names.append(canonical(" ".join(words), aliases))
    return names
