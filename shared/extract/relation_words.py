"""The relation vocabulary (shared/resources/relations.yaml): each relation's inverse, the family
a question's word asks for, and the words that name it in English and Chinese. Read by the
rules that find relations in text and by recall when it follows them from a question."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class RelationKind:
    key: str
    inverse: str
    family: str
    object_type: str | None   # what the other end is when not a person
    words_en: tuple[str, ...]
    words_zh: tuple[str, ...]

    @property
    def symmetric(self) -> bool:
        return self.inverse == self.key


class RelationVocabulary:
    def __init__(self, raw: dict):
        self.kinds: dict[str, RelationKind] = {key: RelationKind(key, v["inverse"], v["family"], v.get("object"),
                                        tuple(v.get("en") or ()), tuple(v.get("zh") or ()))
                      for key, v in raw["relations"].items()}
        missing = {k.inverse for k in self.kinds.values()} - set(self.kinds)
        if missing:
            raise ValueError(f"relations.yaml: inverse without a relation: {sorted(missing)}")
        self.pairs_en: dict[str, str] = dict(raw.get("pairs", {}).get("en", {}))
        self.pairs_zh: dict[str, str] = dict(raw.get("pairs", {}).get("zh", {}))
        self._word_kind = {w.casefold(): k.key for k in self.kinds.values() for w in k.words_en + k.words_zh}

    def kind_of_word(self, word: str) -> str | None:
        """The relation a word names ("fiancée" -> fiance, 姐姐 -> older_sister)."""
        return self._word_kind.get(word.casefold())

    def asked_for(self, key: str) -> frozenset[str]:
        """The relations a question's word reaches: its family ("partner" reaches wife,
        husband, fiance ...; "sister" reaches 姐姐 and 妹妹), or, for a family-wide word like
        "sibling", every relation of the family."""
        family = self.kinds[key].family
        return frozenset(k.key for k in self.kinds.values() if k.family == family)

    def inverse(self, key: str) -> str:
        return self.kinds[key].inverse

    def words(self, language: str) -> tuple[str, ...]:
        """Every relation word of a language ("en" or "zh"), longest first."""
        found = {w for k in self.kinds.values() for w in (k.words_en if language == "en" else k.words_zh)}
        return tuple(sorted(found, key=len, reverse=True))

    def words_pattern(self, language: str) -> str:
        """An alternation of every relation word of a language, longest first."""
        return "|".join(re.escape(w) for w in self.words(language))

    def label(self, key: str) -> str:
        return key.replace("_", " ")


@lru_cache(maxsize=1)
def vocabulary() -> RelationVocabulary:
    import yaml

    raw = yaml.safe_load(resources.files("shared.resources").joinpath("relations.yaml")
                         .read_text(encoding="utf-8"))
    return RelationVocabulary(raw)
