"""Segmentation: one function turns documents and queries into index terms.

jieba splits Chinese (FTS5's own tokenizers do not); English words are lower-cased; stop words
of both languages are dropped. The jieba dictionary loads lazily, once per process, on the
first call or on an explicit warm_up() from a background thread.

Loading it takes about a second, which a process that reads a few English queries (the
prompt hook, without a front) should not pay: jieba's dictionary shapes only text with Han
characters (its default pattern's range); elsewhere only its few entries without one (C++,
AT&T, ...: resources/jieba_latin_words.txt, held equal to the dictionary's by a test) and the
user words can join characters, and every other cut is by character classes alone. So until
the full dictionary is loaded, text without a Han character is cut by a tokenizer whose
dictionary holds just those entries and the same user words: the same terms, in milliseconds.
"""

from __future__ import annotations

import re

from shared.config import TextConfig
from shared.text.jieba_tables import full_tokenizer, latin_tokenizer, read_resource_lines

# A term must hold at least one letter, digit or CJK character; punctuation, emoji and
# whitespace never become terms, so nothing odd reaches an FTS5 query.
_TERM_CHAR = re.compile(r"[^\W_]", re.UNICODE)
# The characters jieba's default pattern reads as Han: the only text its dictionary shapes
# beyond jieba_tables.LATIN_WORDS.
_HAN = re.compile("[\u4E00-\u9FD5]")


class Segmenter:
    """Turns text into a list of lower-cased index terms, Chinese and English alike."""

    def __init__(self, config: TextConfig):
        self._user_words = tuple(config.user_words)
        # Set once the full dictionary is in hand: from then on it cuts everything.
        self._tokenizer = None
        self.stop_words = frozenset(
            w.lower() for w in read_resource_lines("stopwords_en.txt")
            + read_resource_lines("stopwords_zh.txt") + list(config.stop_words))

    def warm_up(self) -> None:
        """Load the jieba dictionary now (about a second) instead of on the first call."""
        self.tokenizer()

    def tokenizer(self):
        """The loaded jieba tokenizer (for part-of-speech tagging and keywords)."""
        if self._tokenizer is None:
            self._tokenizer = full_tokenizer(self._user_words)
        return self._tokenizer

    def _cutter(self, text: str):
        """The full tokenizer once loaded, or for text with Han; else the Latin one."""
        if self._tokenizer is not None or _HAN.search(text):
            return self.tokenizer()
        return latin_tokenizer(self._user_words)

    def terms(self, text: str) -> list[str]:
        """Index terms of text in order, stop words and punctuation removed, duplicates kept."""
        out = []
        for token in self._cutter(text).cut_for_search(text):
            token = token.strip().lower()
            if token and token not in self.stop_words and _TERM_CHAR.search(token):
                out.append(token)
        return out

    def unique_terms(self, text: str, limit: int | None = None) -> list[str]:
        """Distinct terms in first-seen order, at most limit of them (for queries)."""
        seen: dict[str, None] = {}
        for term in self.terms(text):
            seen.setdefault(term, None)
            if limit is not None and len(seen) >= limit:
                break
        return list(seen)
