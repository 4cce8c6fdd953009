"""jieba's loaded tables, once per process for each set of user words.

A jieba dictionary takes about a second to load and its IDF table a quarter of one; both are
read-only once loaded (words are added only while loading), so every Segmenter, entity finder
and keyword extractor of a process built with the same user words shares one copy, however
many times services are assembled (a live config change, a panel and its reader, a test).
The few most recent sets of user words are kept: an edited word list loads once more.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from importlib import resources
from typing import Any

# Loaded dictionaries kept per kind: the one in use and the one before a live edit of the words.
KEPT = 2
LATIN_WORDS = "jieba_latin_words.txt"

_lock = threading.Lock()
_loaded: OrderedDict[tuple[str, tuple[str, ...]], Any] = OrderedDict()
_template_tfidf: Any = None


def read_resource_lines(name: str) -> list[str]:
    """The lines of a resource text file, without blanks and # comments."""
    text = resources.files("shared.resources").joinpath(name).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def full_tokenizer(user_words: tuple[str, ...]) -> Any:
    """jieba's tokenizer with its whole dictionary, our user words and `user_words` added."""
    return _cached("full", user_words, lambda: _load(None, user_words))


def latin_tokenizer(user_words: tuple[str, ...]) -> Any:
    """A tokenizer whose dictionary holds only jieba's entries without a Han character, and
    the same user words: it cuts text without Han as the full one does, in milliseconds."""
    def load() -> Any:
        words = resources.files("shared.resources").joinpath(LATIN_WORDS)
        with resources.as_file(words) as path:
            return _load(str(path), user_words)

    return _cached("latin", user_words, load)


def idf_table() -> tuple[dict[str, float], float]:
    """jieba's IDF table and its median (for words it lacks)."""
    template = _tfidf()
    return template.idf_freq, template.median_idf


def keyword_extractor(tokenizer: Any, postokenizer: Any) -> Any:
    """jieba's TF-IDF keyword extractor cutting with our tokenizers, over the shared IDF table."""
    extractor = copy.copy(_tfidf())
    extractor.tokenizer, extractor.postokenizer = tokenizer, postokenizer
    return extractor


def _tfidf() -> Any:
    global _template_tfidf
    with _lock:
        if _template_tfidf is None:
            import jieba.analyse

            _template_tfidf = jieba.analyse.TFIDF()
        return _template_tfidf


def _cached(kind: str, user_words: tuple[str, ...], load: Callable[[], Any]) -> Any:
    key = (kind, user_words)
    # One lock for all: two threads asking at once load once, and loads are rare.
    with _lock:
        if key in _loaded:
            _loaded.move_to_end(key)
            return _loaded[key]
        tokenizer = load()
        _loaded[key] = tokenizer
        while len([k for k in _loaded if k[0] == kind]) > KEPT:
            del _loaded[next(k for k in _loaded if k[0] == kind)]
        return tokenizer


def _load(dictionary: str | None, user_words: tuple[str, ...]) -> Any:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer(dictionary) if dictionary else jieba.Tokenizer()
    tokenizer.initialize()
    for line in read_resource_lines("user_words.txt"):
        word, *rest = line.split()
        tokenizer.add_word(word, int(rest[0]) if rest and rest[0].isdigit() else None)
    for word in user_words:
        tokenizer.add_word(word.strip())
    return tokenizer
