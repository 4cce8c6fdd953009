"""Segmentation of Chinese and English into index terms."""

from __future__ import annotations

import pytest

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
