"""The words of time expressions, Chinese and English, each written once: numerals, weekdays,
months, units, the days named from today and the words that step to the previous or the next
week, month or year. The time parser (time_expressions.py) builds its patterns from these."""

from __future__ import annotations

import calendar
import re

# -- Numbers ----------------------------------------------------------------------------------

ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
             "八": 8, "九": 9}
# What a date's month or day is written with (三月, 二十号): 两 counts (两天, 两点) but never
# names a month or a day, and 零 starts none.
ZH_NUMERAL = "".join(c for c in ZH_DIGITS if c not in "零两") + "十"
ZH_COUNT_NUMERAL = ZH_NUMERAL + "两"
ZH_COUNT = rf"([\d{ZH_COUNT_NUMERAL}]+)"  # 3, 三, 十五, 两
ZH_DAY_NUMBER = rf"(\d{{1,2}}|[{ZH_NUMERAL}]+)"  # the month or the day of a date: 3, 十二, 二十五

EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
              "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_EN_COUPLE = ("a couple of", "couple of")  # two
EN_COUNT = "(" + "|".join((r"\d+", *_EN_COUPLE, *sorted(EN_NUMBERS, key=len, reverse=True))) + ")"


def zh_number(text: str) -> int | None:
    """'3' / '十二' / '二十五' / '两' -> int; None for anything else."""
    if text.isdigit():
        return int(text)
    if not text or any(c not in ZH_DIGITS and c != "十" for c in text):
        return None
    if "十" not in text:
        value = 0
        for c in text:
            value = value * 10 + ZH_DIGITS[c]
        return value
    tens, _, ones = text.partition("十")
    if "十" in ones:
        return None
    return (ZH_DIGITS[tens] if tens else 1) * 10 + (ZH_DIGITS[ones] if ones else 0)


def en_number(word: str) -> int:
    """A count EN_COUNT matched: '3' / 'three' / 'a couple of' -> int."""
    word = word.lower()
    return int(word) if word.isdigit() else 2 if word in _EN_COUPLE else EN_NUMBERS[word]


# -- Calendar names ---------------------------------------------------------------------------

ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
ZH_WEEK_WORD = "(?:周|星期|礼拜)"
ZH_WEEKDAY = "([" + "".join(ZH_WEEKDAYS) + "])"  # the day after a week word: 周三, 星期天
EN_WEEKDAYS = {d.lower(): i for i, d in enumerate(calendar.day_name)}
EN_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
EN_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
EN_MONTH = "(" + "|".join(sorted(EN_MONTHS, key=len, reverse=True)) + ")"  # March, Mar (any case)
EN_MONTH_NAME = "|".join(m for m in calendar.month_name if m)  # capitalised: "may" is a verb

# -- Units and steps --------------------------------------------------------------------------

ZH_UNITS = {"天": "day", "日": "day", "周": "week", "星期": "week", "个星期": "week", "礼拜": "week",
            "个礼拜": "week", "个月": "month", "年": "year"}
ZH_UNIT = "(" + "|".join(sorted(ZH_UNITS, key=len, reverse=True)) + ")"
EN_UNIT = "(day|week|month|year)"  # the patterns add a plural s

# 上周, 下个月, 这个星期, 本周, 上上个礼拜: weeks or months from this one (个 is optional).
ZH_STEPS = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "下下": 2}
ZH_STEP = "(" + "|".join(sorted(ZH_STEPS, key=len, reverse=True)) + ")个?"
ZH_YEAR_STEPS = {"前": -2, "去": -1, "今": 0, "明": 1, "后": 2}  # 前年 ... 后年
EN_STEPS = {"last": -1, "past": -1, "this": 0, "coming": 0, "upcoming": 0, "the": 0, "next": 1}

# Days named from today; in DAY_WORD a longer word comes first where one holds another (大后天,
# 后天), and the English words share one pair of word boundaries (one test, not one a word).
DAY_WORDS = {"大前天": -3, "前天": -2, "昨天": -1, "昨晚": -1, "昨日": -1, "今天": 0, "今晚": 0,
             "今早": 0, "今日": 0, "明天": 1, "明晚": 1, "明早": 1, "后天": 2, "大后天": 3,
             "the day before yesterday": -2, "yesterday": -1, "last night": -1, "today": 0,
             "earlier today": 0, "tonight": 0, "this morning": 0, "this afternoon": 0,
             "this evening": 0, "tomorrow": 1, "day after tomorrow": 2}
_LONGEST_FIRST = sorted(DAY_WORDS, key=len, reverse=True)
DAY_WORD = (r"\b(?:" + "|".join(re.escape(w) for w in _LONGEST_FIRST if w.isascii()) + r")\b|"
            + "|".join(w for w in _LONGEST_FIRST if not w.isascii()))
