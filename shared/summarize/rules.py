"""The offline summarizer: a conversation to a structured memory by rules, deterministic, no I/O.

- participants: the speakers, then the people named in what they said, as the entity rules type
  names (shared/extract/entities.py, relations.py: not places, organisations, pets or 熊猫);
- topics: keywords (jieba TF-IDF over nouns for Chinese; noun-ish content words for English);
- key_facts: the turns that state something about a person (facts.py), each rewritten with its
  speaker as subject and its dates resolved (rewrite.py);
- summary: the key facts in order within summarizer.summary_chars;
- sentiment: a zh+en lexicon with simple negation (lexicon.py);
- importance: what was said — plans, preferences, personal facts, life events, strong feeling
  weigh more than small talk;
- persona_summary: who is who — each speaker with the keywords of all they said (kept facts or
  not, so the memory still knows what the rest of the conversation was about), the people named.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from shared.config import SummarizerConfig
from shared.extract.atomize import AtomRules
from shared.extract.entities import NOT_NAMES, EntityFinder
from shared.extract.relations import people_named
from shared.store.model.documents import MAX_LABEL_CHARS, Sentiment
from shared.summarize import lexicon
from shared.summarize.conversation import UNNAMED, Turn
from shared.summarize.facts import (
    FactWeights,
    KeyFact,
    TurnReading,
    is_chinese,
    key_facts,
    read_turns,
    spoken_sentences,
)
from shared.summarize.schema import StructuredMemory
from shared.text.jieba_tables import idf_table
from shared.text.segment import Segmenter

MAX_TOPICS = 5
MAX_PARTICIPANTS = 8
# Keywords per speaker in the who-is-who line: chosen from 8, 12, 16 on held-out LoCoMo folds
# (scripts/bench_summarize.py --person-keywords); capped at 16 so the line stays short.
PERSON_KEYWORDS = 16
_CJK = re.compile(r"[\u4e00-\u9fff]")
# A capitalised word inside a sentence, not followed by another (two in a row are a title or a
# place: "Harry Potter", "New York").
_NAME = re.compile(r"(?<=[a-z,;] )([A-Z][a-z]{1,20})\b(?! [A-Z])")
# Words in front of which a capitalised word is a place, or a pet.
_PLACE_BEFORE = frozenset("in at to from near visit visited visiting around across through toward towards of the a an"
                          .split())
_NOT_PEOPLE = frozenset("""God Christmas Thanksgiving Halloween Easter English Spanish French German Chinese
Japanese Italian American Canadian Mexican Indian Korean Internet Google Instagram Facebook Twitter
YouTube Netflix Spotify Zoom Mom Dad Mum Grandma Grandpa Bro Sis Lord Jesus Irish Scottish British
European African Asian Australian Brazilian Russian Greek Swedish Dutch Polish Turkish Thai Vietnamese
Midwestern Mon Tue Tues Wed Thu Thur Thurs Fri Sat Sun Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov
Dec""".split())
_NOUN_TAGS = ("n", "nz", "ns", "nt", "nw", "vn")
_IMPORTANCE_BY_TYPE = {"planned": 0.12, "factual": 0.1, "relational": 0.1, "preference": 0.08,
                       "episodic": 0.07, "unknown": 0.04}


@dataclass(frozen=True)
class Distilled:
    """A summary and the key facts it was made of (with the turn each came from)."""

    memory: StructuredMemory
    facts: list[KeyFact]


class RulesSummarizer:
    """Build once per process and share; summarize() is thread-safe."""

    def __init__(self, atom_rules: AtomRules, segmenter: Segmenter, weights: FactWeights = FactWeights(),
                 person_keywords: int = PERSON_KEYWORDS):
        self.atom_rules = atom_rules
        self.segmenter = segmenter
        self.weights = weights
        self.person_keywords = person_keywords
        self.finder = EntityFinder(segmenter)

    def summarize(self, turns: list[Turn], config: SummarizerConfig) -> StructuredMemory:
        return self.distil(turns, config).memory

    def read(self, turns: list[Turn]) -> list[TurnReading]:
        """Every turn as the fact rules see it (scripts/bench_summarize.py tunes on these)."""
        return read_turns(turns, self.atom_rules)

    def distil(self, turns: list[Turn], config: SummarizerConfig) -> Distilled:
        """The memory and its key facts with the turn each came from."""
        readings = self.read(turns)
        facts = key_facts(readings, self.weights, config.max_key_facts)
        said = [[s.text for s in r.statements] + ([r.image] if r.image else []) for r in readings]
        speakers = list(dict.fromkeys(t.speaker for t in turns if t.speaker != UNNAMED))
        # Keywords come from all that was said, questions and replies not kept as facts too: the
        # memory should still know what the rest of the conversation was about.
        spoken = {s: [x for r in readings if r.turn.speaker == s for x in spoken_sentences(r.turn.text)]
                  for s in speakers}
        chinese = is_chinese(turns)
        tagged = {s: self._tagged("\n".join(texts)) if chinese else [] for s, texts in spoken.items()}
        everything = [word for words in tagged.values() for word in words]
        named = self._named(said, speakers)
        people = speakers + named
        keywords = {s: self._keywords(spoken[s], tagged[s], people, self.person_keywords) for s in speakers}
        topics = self._keywords([x for texts in spoken.values() for x in texts], everything, people, MAX_TOPICS)
        memory = StructuredMemory(
            summary=_summary(facts, speakers, topics, config.summary_chars, chinese),
            topics=topics, participants=[p[:MAX_LABEL_CHARS] for p in people[:MAX_PARTICIPANTS]],
            key_facts=[f.text for f in facts], sentiment=_sentiment(turns),
            importance=_importance(facts, turns), persona_summary=_who_is_who(keywords, named, chinese),
            provider="rules")
        return Distilled(memory, facts)

    # -- names and keywords ---------------------------------------------------------------------

    def _tagged(self, text: str) -> list[tuple[str, str]]:
        """(word, part-of-speech) of Chinese text, by our jieba tokenizer (custom words loaded)."""
        return [(w.word, w.flag) for w in self.finder.posseg().cut(text)]

    def _named(self, said: list[list[str]], speakers: list[str]) -> list[str]:
        """People named in the statements (said: each turn's statements): the names the entity
        rules take for people (not places, organisations, pets, 熊猫), in English only those
        written inside a sentence and never in lower case in the conversation ("Game")."""
        known = {s.casefold() for s in speakers}
        lower = {w for statements in said for s in statements for w in re.findall(r"\b[a-z]+\b", s)}
        found = []
        for sentence in (s for statements in said for s in statements):
            people = people_named(self.finder, sentence)
            english = set(self._english_names(sentence, known))
            found += [name for name in people if _CJK.search(name) or (
                name in english and name.lower() not in lower and name.lower().rstrip("s") not in lower)]
        return [n for n in dict.fromkeys(found) if n.casefold() not in known]

    def _english_names(self, sentence: str, known: set[str]) -> list[str]:
        """Capitalised words inside a sentence that are not places, titles, days or speakers'
        nicknames (a turn that speaks of a pet names no people: its names are the pet's)."""
        names = []
        for m in _NAME.finditer(sentence):
            name = m.group(1)
            before = (sentence[:m.start()].split() or [""])[-1]
            if (before[:1].isupper() or before[:1] in "'\"“‘" or before.lower() in _PLACE_BEFORE
                    or name in NOT_NAMES or name in _NOT_PEOPLE or name.lower() in self.segmenter.stop_words
                    or any(s.startswith(name.casefold()) for s in known)):
                continue
            names.append(name)
        return names

    def _keywords(self, texts: list[str], tagged: list[tuple[str, str]], names: list[str], limit: int) -> list[str]:
        # Names and their beginnings ("Mel" for Melanie) are people, not topics.
        exclude = {n.casefold()[:end] for n in names for end in range(min(3, len(n)), len(n) + 1)}
        found = self._chinese_keywords(tagged, exclude, limit) if tagged else []
        found += lexicon.english_keywords(texts, exclude, self.segmenter.stop_words, limit)
        return list(dict.fromkeys(found))[:limit]

    def _chinese_keywords(self, tagged: list[tuple[str, str]], exclude: set[str], limit: int) -> list[str]:
        """jieba's TF-IDF over the nouns of the text."""
        idf, median = idf_table()
        nouns = [w for w, flag in tagged if flag in _NOUN_TAGS and len(w) >= 2 and _CJK.search(w)
                 and w not in self.segmenter.stop_words and w.casefold() not in exclude]
        counts = Counter(nouns)
        first = {w: i for i, w in reversed(list(enumerate(nouns)))}
        return sorted(counts, key=lambda w: (-counts[w] * idf.get(w, median), first[w]))[:limit]

def _summary(facts: list[KeyFact], speakers: list[str], topics: list[str], budget: int, chinese: bool) -> str:
    """The key facts in order, as many as fit the budget; without any, who talked about what."""
    parts, used = [], 0
    for fact in facts:
        cost = len(fact.text) + (0 if chinese else 1)
        if used + cost > budget:
            break
        parts.append(fact.text)
        used += cost
    if parts:
        return ("" if chinese else " ").join(parts)
    if facts:  # even the first fact is longer than the budget: its beginning
        return facts[0].text[:budget - 1].rstrip() + "…"
    who = ("和" if chinese else " and ").join(speakers) or ("有人" if chinese else "Someone")
    if chinese:
        return f"{who}闲聊了几句" + (f"，谈到{'、'.join(topics)}。" if topics else "。")
    return f"{who} made small talk" + (f" about {', '.join(topics)}." if topics else ".")


def _sentiment(turns: list[Turn]) -> Sentiment:
    total = lexicon.Feeling()
    for turn in turns:
        total += lexicon.feeling(turn.text)
    return total.label()


def _importance(facts: list[KeyFact], turns: list[Turn]) -> float:
    """0.1 for small talk; plans, personal facts, preferences, life events and strong feeling add."""
    said = min(0.5, sum(_IMPORTANCE_BY_TYPE[f.atom_type] for f in facts))
    text = "\n".join(f.text for f in facts)
    events = min(0.2, 0.07 * lexicon.weighty(text))
    strong = min(0.15, 0.03 * lexicon.feeling(text).strong)
    dated_plan = 0.05 if any(f.atom_type == "planned" and f.dated for f in facts) else 0.0
    return round(min(1.0, 0.1 + said + events + strong + dated_plan), 2)


def _who_is_who(keywords: dict[str, list[str]], named: list[str], chinese: bool) -> str | None:
    """Each speaker with what they talked about, and the people they named (None: nothing known)."""
    if not named and not any(keywords.values()):
        return None
    if chinese:
        line = "；".join(f"{s}谈到{'、'.join(k)}" if k else s for s, k in keywords.items())
        return line + (f"；还提到{'、'.join(named[:6])}。" if named else "。")
    line = "; ".join(f"{s} talked about {', '.join(k)}" if k else s for s, k in keywords.items())
    return line + (f"; also mentioned: {', '.join(named[:6])}." if named else ".")
