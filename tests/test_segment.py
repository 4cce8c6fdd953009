"""Segmentation of Chinese and English into index terms."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.config import TextConfig
from shared.text.segment import Segmenter


@pytest.fixture(scope="module")
def segmenter():
    return Segmenter(TextConfig(user_words=("阿坤记忆",), stop_words=("garden",)))


def test_chinese_is_split_into_words(segmenter):
    assert segmenter.terms("我对花生过敏，去年在杭州体检时发现的") == [
        "花生", "过敏", "去年", "杭州", "体检", "时", "发现"]


def test_english_is_lower_cased_without_stop_words(segmenter):
    assert segmenter.terms("I Found OUT about the Peanut allergy!") == ["found", "peanut", "allergy"]


def test_mixed_text_punctuation_and_emoji(segmenter):
    assert segmenter.terms("用 Python 写 MCP server 😀 —— 好！") == ["用", "python", "写", "mcp", "server", "好"]


def test_user_words_stay_whole_and_extra_stop_words_drop(segmenter):
    assert "阿坤记忆" in segmenter.terms("我在用阿坤记忆保存笔记")
    assert "garden" not in segmenter.terms("the garden is green")


def test_packaged_user_words_are_loaded(segmenter):
    assert "知识图谱" in segmenter.terms("我们在做知识图谱")


def test_unique_terms_keeps_order_and_limit(segmenter):
    assert segmenter.unique_terms("tea coffee tea juice coffee", limit=2) == ["tea", "coffee"]
    assert segmenter.unique_terms("tea coffee tea juice coffee") == ["tea", "coffee", "juice"]


# -- text without Han before the dictionary loads (shared/text/segment.py) ----------------------

_LATIN_PIECES = ("C++", "c++", "C#", "c#", "AT&T", "e-mail", "3.5%", "v2.0", "a_b", "x.y.z", "-", "+", "#",
                 "&", "café", "naïve", "Ünïcödé", "Привет", "ひらがな", "한국어", "😀", "'s", "don't", "\n",
                 "  ", ",", "!", "?", "(", ")", "/", "2024-05-08", "10:30", "gpt4o", "New", "York", "_")


def test_the_latin_dictionary_is_the_main_ones_entries_without_han():
    import os
    import re

    import jieba

    han = re.compile("[\u4E00-\u9FD5]")
    main = os.path.join(os.path.dirname(jieba.__file__), "dict.txt")
    without_han = [line.strip() for line in open(main, encoding="utf-8") if not han.search(line.split(" ")[0])]
    from importlib import resources

    from shared.text.jieba_tables import LATIN_WORDS

    packaged = resources.files("shared.resources").joinpath(LATIN_WORDS).read_text(encoding="utf-8")
    assert packaged.split("\n")[:-1] == without_han


@given(st.lists(st.one_of(st.sampled_from(_LATIN_PIECES), st.text(alphabet=st.characters(
    blacklist_categories=("Cs",), blacklist_characters="".join(map(chr, range(0x4E00, 0x9FD6)))), max_size=12)),
    max_size=20))
@settings(max_examples=300, deadline=None)
def test_text_without_han_is_cut_alike_before_and_after_the_dictionary_loads(pieces):
    """A fresh segmenter cuts text without Han with the small dictionary; a loaded one with
    jieba's own: the terms must be the same (user words included, one of them Latin)."""
    text = " ".join(pieces) if len(pieces) % 2 else "".join(pieces)
    config = TextConfig(user_words=("gpt4o", "阿坤记忆"))
    assert Segmenter(config).terms(text) == _loaded(config).terms(text)


_LOADED: dict = {}


def _loaded(config: TextConfig) -> Segmenter:
    if config not in _LOADED:
        _LOADED[config] = Segmenter(config)
        _LOADED[config].warm_up()
    return _LOADED[config]
