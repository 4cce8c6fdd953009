"""A turn's statements rewritten as one stand-alone sentence about its speaker.

"I adopted a cat" said by Caroline -> "Caroline adopted a cat"; "my sister" -> "Caroline's
sister"; "我养了一只猫" said by 小王 -> "小王养了一只猫"; "you" -> the other speaker when there are
two. Dates are resolved in place: "next Friday" -> "next Friday (19 May 2023)". English verbs
after the new subject agree with it ("I love" -> "Caroline loves"); the rest is left as said.
"""

from __future__ import annotations

import re

from shared.extract.timeparse import DateMention

_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?|[^A-Za-z]+")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_ADVERBS = frozenset("""really just also always never still actually usually often sometimes even finally
recently totally definitely honestly absolutely kinda only already truly personally seriously rarely
occasionally generally mostly constantly literally simply certainly probably sure then now too
first last""".split())
# Forms a new third-person subject takes as they are: modals, past tenses, negated auxiliaries.
_AS_IS = frozenset("""can could will would shall should may might must did was had went got saw took made
came ran met bought found felt thought told said gave left kept began won lost wrote set built taught
brought caught sold spent sent sat stood heard held knew grew drew flew threw wore rode drove ate
fell broke chose spoke forgot became led paid slept swam sang understood read put hit let cut quit
hurt fed fought hung meant rang rose shot shut stuck struck swore tore woke dug bet cost used
gotta wanna""".split())
_AUXILIARIES = {"am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "don't": "doesn't",
                "haven't": "hasn't", "aren't": "isn't", "weren't": "wasn't", "gonna": "is gonna",
                "been": "has been", "going": "is going"}
_CONTRACTED = {"m": "is", "ve": "has", "d": "would", "ll": "will", "re": "is"}
_PLURAL_CONTRACTED = {"re": "are", "ve": "have", "d": "would", "ll": "will"}
# A sentence that starts with one of these has dropped its subject ("Gonna check it out").
_SUBJECTLESS = frozenset("""gonna going been just got went had started finished thinking planning working
trying heading hoping looking getting learning doing taking making took made tried love loved""".split())
# "我妹妹" is "my sister": 小李的妹妹.
_KIN = "|".join("""妹妹 姐姐 哥哥 弟弟 爸爸 妈妈 爸 妈 父亲 母亲 老公 老婆 丈夫 妻子 儿子 女儿 孩子 家人 家 爷爷 奶奶
外公 外婆 朋友 同事 老板 男朋友 女朋友 室友 同学 老师""".split())
_CLAUSE_START = frozenset("and but so if when because that since while how what where why who than as".split())


def about_speaker(statements: list[tuple[str, tuple[DateMention, ...]]], image: str | None,
                  speaker: str, other: str | None) -> str:
    """The statements as one text with the speaker as subject (image: a shared photo's caption)."""
    chinese = any(_CJK.search(text) for text, _ in statements)
    parts = [_rewrite(_dated(text, dates, chinese), speaker, other, chinese) for text, dates in statements]
    if image:
        parts.append(f"{speaker}分享了照片：{image}。" if chinese else f"{speaker} shared {image.rstrip('.')}.")
    joined = ("" if chinese else " ").join(_closed(p, chinese) for p in parts if p)
    if speaker not in joined:
        joined = f"{speaker}：{joined}" if chinese else f"{speaker}: {joined}"
    return joined


def _closed(text: str, chinese: bool) -> str:
    """The statement ended as a sentence (a clause cut off at ";" too)."""
    text = text.strip().rstrip(";；").rstrip()
    if text and text[-1] not in ".!。！…":
        text += "。" if chinese else "."
    return text


def _dated(text: str, dates: tuple[DateMention, ...], chinese: bool) -> str:
    """Each date expression followed by the date it names, unless it names its year itself."""
    for mention in sorted(dates, key=lambda m: m.start, reverse=True):
        if re.search(r"\d{4}", mention.text):
            continue
        label = f"（{mention.label(chinese=True)}）" if chinese else f" ({mention.label()})"
        text = text[:mention.end] + label + text[mention.end:]
    return text


def _rewrite(text: str, speaker: str, other: str | None, chinese: bool) -> str:
    if chinese:
        return _rewrite_chinese(text, speaker, other)
    return _rewrite_english(text, speaker, other)


def _rewrite_chinese(text: str, speaker: str, other: str | None) -> str:
    text = re.sub(r"我们|咱们", f"{speaker}他们", text)
    text = re.sub(rf"(?<!自)我(?=(?:{_KIN}))", f"{speaker}的", text)
    text = re.sub(r"(?<!自)我", speaker, text)
    if other:
        text = re.sub(r"(?:你|您)(?!们|好)", other, text)
    return text


def _rewrite_english(text: str, speaker: str, other: str | None) -> str:
    tokens = _TOKEN.findall(text)
    words = [i for i, t in enumerate(tokens) if t[:1].isalpha()]
    if words and tokens[words[0]].lower() in _SUBJECTLESS and not _followed_by_verb(tokens, words, 0):
        tokens[words[0]] = f"I {tokens[words[0]].lower()}"
        tokens = _TOKEN.findall("".join(tokens))
        words = [i for i, t in enumerate(tokens) if t[:1].isalpha()]
    for n, i in enumerate(words):
        tokens[i] = _pronoun(tokens, words, n, speaker, other)
    return "".join(tokens)


def _followed_by_verb(tokens: list[str], words: list[int], n: int) -> bool:
    """'Painting is fun': a sentence-initial -ing word that is itself the subject."""
    return n + 1 < len(words) and tokens[words[n + 1]].lower() in ("is", "was", "has", "makes", "helps", "can", "'s")


def _pronoun(tokens: list[str], words: list[int], n: int, speaker: str, other: str | None) -> str:
    word = tokens[words[n]]
    low = word.lower()
    base, _, tail = low.partition("'")
    if base == "i":
        if tail:
            return f"{speaker} {_CONTRACTED.get(tail, tail)}"
        _agree(tokens, words, n)
        return speaker
    if low in ("me", "myself"):
        return speaker if low == "me" else "themself"
    if low in ("my", "mine"):
        return f"{speaker}'s"
    if base == "we":
        return f"{speaker} and others" + (f" {_PLURAL_CONTRACTED.get(tail, tail)}" if tail else "")
    if low == "us":
        return f"{speaker} and others"
    if low in ("our", "ours"):
        return f"{speaker}'s"
    if low == "ourselves":
        return "themselves"
    if other is None:
        return word
    if base == "you" and tail:
        return f"{other} {_CONTRACTED.get(tail, tail)}"
    if low == "you":
        subject = n == 0 or tokens[words[n - 1]].lower() in _CLAUSE_START or tokens[words[n] - 1].strip() in (",", ";")
        _agree(tokens, words, n, verbs=subject)
        return other
    if low in ("your", "yours"):
        return f"{other}'s"
    if low == "yourself":
        return "themself"
    return word


def _agree(tokens: list[str], words: list[int], n: int, verbs: bool = True) -> None:
    """The verb after a new third-person subject agrees with it (adverbs skipped)."""
    for m in range(n + 1, min(n + 4, len(words))):
        word = tokens[words[m]]
        low = word.lower()
        if low in _ADVERBS or (low.endswith("ly") and len(low) > 4):
            continue
        if low in _AUXILIARIES:
            tokens[words[m]] = _AUXILIARIES[low]
        elif verbs:
            tokens[words[m]] = third_person(word)
        return


def third_person(verb: str) -> str:
    """'love' -> 'loves', 'go' -> 'goes', 'try' -> 'tries'; past forms and modals as they are."""
    low = verb.lower()
    if low in _AUXILIARIES:
        return _AUXILIARIES[low]
    if low in _AS_IS or "'" in low or not low.isalpha() or (low.endswith(("ed", "s")) and not low.endswith("ss")):
        return verb
    if low.endswith("ing"):
        return f"is {verb}"
    if low.endswith(("sh", "ch", "x", "z", "o", "ss")):
        return verb + "es"
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"
