"""Word lists of the rules summarizer (shared/resources, written for this project) and what is
read with them: sentiment with simple negation, weighty matters, English keywords.

Chinese is matched by substring (longest word first, so 不错 is read whole and not as 不 + 错);
English by whole words.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.store.model.documents import Sentiment

_EN_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_EN_WORD_ANY_CASE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_EN_NEGATORS = frozenset("not no never nothing nobody neither nor hardly barely".split())
_ZH_NEGATORS = ("并不", "不太", "没有", "不", "没", "别", "未", "无")
# A negator this many words before a sentiment word flips it.
NEGATION_WINDOW = 3
# Words in front of which an English word is read as a noun ("a painting", "my kids").
_NOUN_MARKERS = frozenset("a an the my our your his her their some this that these those any".split())
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _lines(name: str) -> list[str]:
    text = resources.files("shared.resources").joinpath(name).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


@dataclass(frozen=True)
class Lexicon:
    """The word lists, read once per process (see lexicon())."""

    en_sentiment: dict[str, int]
    zh_sentiment: dict[str, int]
    zh_pattern: re.Pattern | None
    weighty_en: re.Pattern
    weighty_zh: tuple[str, ...]
    generic_en: frozenset[str]


@lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    def weights(name: str) -> dict[str, int]:
        out = {}
        for line in _lines(name):
            word, _, weight = line.rpartition(" ")
            out[word.strip().lower()] = int(weight)
        return out

    zh = weights("sentiment_zh.txt")
    weighty = _lines("weighty_words.txt")
    en_weighty = [w.lower() for w in weighty if not _CJK.search(w)]
    return Lexicon(
        en_sentiment=weights("sentiment_en.txt"), zh_sentiment=zh,
        zh_pattern=re.compile("|".join(sorted(map(re.escape, zh), key=len, reverse=True))) if zh else None,
        weighty_en=re.compile(r"\b(?:" + "|".join(map(re.escape, en_weighty)) + r")\b", re.I),
        weighty_zh=tuple(w for w in weighty if _CJK.search(w)),
        generic_en=frozenset(w.lower() for w in _lines("generic_en.txt")))


@dataclass(frozen=True)
class Feeling:
    """Sentiment evidence of some text: summed positive and negative weight, strong words."""

    positive: float = 0.0
    negative: float = 0.0
    strong: int = 0

    def __add__(self, other: Feeling) -> Feeling:
        return Feeling(self.positive + other.positive, self.negative + other.negative, self.strong + other.strong)

    def label(self) -> Sentiment:
        """positive / negative when one side clearly outweighs the other, else neutral."""
        total = self.positive + self.negative
        if total < 2:
            return "neutral"
        balance = (self.positive - self.negative) / total
        return "positive" if balance >= 0.34 else "negative" if balance <= -0.34 else "neutral"


def feeling(text: str) -> Feeling:
    """The sentiment evidence of one sentence, negation applied."""
    words = _sentiment_words(text)
    found = Feeling()
    for score, negated in words:
        score = -score if negated else score
        found += Feeling(max(score, 0), max(-score, 0), int(abs(score) >= 2))
    return found


def _sentiment_words(text: str) -> list[tuple[int, bool]]:
    """(weight, negated) of every sentiment word of text, English and Chinese."""
    lex = lexicon()
    hits = []
    tokens = _EN_WORD.findall(text.lower().replace("’", "'"))
    for i, token in enumerate(tokens):
        pair = f"{token} {tokens[i + 1]}" if i + 1 < len(tokens) else ""
        weight = lex.en_sentiment.get(pair) or lex.en_sentiment.get(token)
        if weight:
            before = tokens[max(0, i - NEGATION_WINDOW):i]
            hits.append((weight, any(b in _EN_NEGATORS or b.endswith("n't") for b in before)))
    if lex.zh_pattern is not None and _CJK.search(text):
        for m in lex.zh_pattern.finditer(text):
            before = text[max(0, m.start() - 2):m.start()]
            hits.append((lex.zh_sentiment[m.group(0)], before.endswith(_ZH_NEGATORS)))
    return hits


def weighty(text: str) -> int:
    """How many life events and matters of weight the text speaks of."""
    lex = lexicon()
    return len(lex.weighty_en.findall(text)) + sum(text.count(w) for w in lex.weighty_zh)


def english_keywords(sentences: list[str], exclude: set[str], stop_words: frozenset[str], limit: int) -> list[str]:
    """Noun-ish keywords of English text: content words (no stop, generic or sentiment words,
    no names given in exclude) by frequency, counted double where a determiner or possessive
    marks them as nouns (the last word of "a nasty flood"); a pair of such words seen together
    twice ("support group") ranks as one keyword. Lower case unless written capitalised inside
    a sentence ("Louvre"). Ties: first seen first."""
    lex = lexicon()
    skip = exclude | stop_words | lex.generic_en | set(lex.en_sentiment)
    counts: Counter[str] = Counter()
    pairs: Counter[str] = Counter()
    first: dict[str, int] = {}
    proper: dict[str, str] = {}  # word -> as written capitalised inside a sentence
    for sentence in sentences:
        written = _EN_WORD_ANY_CASE.findall(sentence.replace("’", "'"))
        tokens = [w.lower() for w in written]
        marked = False  # inside a run of content words that a determiner opened
        for i, token in enumerate(tokens):
            if not _keyword(token, skip):
                marked = token in _NOUN_MARKERS
                continue
            if i and written[i][0].isupper():
                proper.setdefault(token, written[i])
            following = i + 1 < len(tokens) and _keyword(tokens[i + 1], skip)
            # The last word of "a nasty flood" is the noun: it counts double.
            counts[token] += 2 if marked and not following else 1
            first.setdefault(token, len(first))
            if following:
                pairs[f"{token} {tokens[i + 1]}"] += 1
                first.setdefault(f"{token} {tokens[i + 1]}", len(first))
    scored = dict(counts)
    for pair, seen in pairs.items():
        if seen >= 2:
            a, b = pair.split()
            scored[pair] = counts[a] + counts[b]
            scored.pop(a, None)
            scored.pop(b, None)
    ranked = sorted((k for k, v in scored.items() if v >= 2), key=lambda k: (-scored[k], first[k]))
    return [" ".join(proper.get(w, w) for w in k.split()) for k in _merge_plurals(ranked)[:limit]]


def _keyword(token: str, skip: set[str]) -> bool:
    return len(token) >= 3 and "'" not in token and token not in skip


def _merge_plurals(ranked: list[str]) -> list[str]:
    """'kid' and 'kids' are one keyword: the better-ranked form stays."""
    seen: set[str] = set()
    out = []
    for word in ranked:
        stem = word[:-1] if word.endswith("s") and not word.endswith("ss") else word
        if stem not in seen:
            seen.add(stem)
            out.append(word)
    return out
