"""A long text cut into passages an embedder reads whole: windows of whole turns and sentences.

An embedding model reads a bounded number of tokens (e5: 512) and costs more per token the
longer its input (attention grows with the square of the length), so one vector of a long
memory holds its beginning and nothing else. Passages keep every part findable by meaning at
a cost linear in the length: lines (a conversation's turns) are the units, a line too long for
one passage is cut at sentence ends (Western and CJK punctuation), a sentence too long at the
budget itself; units fill a window up to the budget, and a short last unit of a window starts
the next one too, so a fact split across the boundary is whole in one of them.

Token counts are estimated without the model's tokenizer: a Han, kana or hangul character is
about one token of a multilingual SentencePiece vocabulary, a Latin word about one per five
letters, each other symbol one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Estimated tokens a passage holds: well inside what e5 reads (512), where attention costs
# little next to the rest of the model, so a long text costs per character what short ones do.
PASSAGE_TOKENS = 160
# How much of a matched passage explain shows.
EXCERPT_CHARS = 240
# A window's last unit opens the next window too when it is at most this share of a passage.
OVERLAP_SHARE = 0.25

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?;…])\s+|(?<=[。！？；])")


@dataclass(frozen=True)
class Passage:
    start: int  # character offsets into the text
    end: int
    text: str


def estimated_tokens(text: str) -> int:
    return sum(1 if len(m) == 1 else -(-len(m) // 5) for m in _TOKEN.findall(text))


def passages(text: str, budget: int = PASSAGE_TOKENS) -> list[Passage]:
    """The text as passages of at most about `budget` tokens, in order, covering all of it;
    one passage (the whole text) when it fits."""
    if estimated_tokens(text) <= budget:
        return [Passage(0, len(text), text)]
    units = [u for start, end in _lines(text) for u in _fitted(text, start, end, budget)]
    out: list[Passage] = []
    first = 0
    while first < len(units):
        last, used = first, units[first][2]
        while last + 1 < len(units) and used + units[last + 1][2] <= budget:
            last += 1
            used += units[last][2]
        start, end = units[first][0], units[last][1]
        out.append(Passage(start, end, text[start:end]))
        if last + 1 >= len(units):
            break
        overlap = last > first and units[last][2] <= OVERLAP_SHARE * budget
        first = last if overlap else last + 1
    return out


def passage_holding(parts: Sequence[Passage], text: str, part: str) -> int:
    """The number of the first of a text's passages (`parts`, passages(text)) that holds `part`
    whole; 0 when none does or `part` is not in the text (the memory's own vector stands for it)."""
    needle = part.strip()
    at = text.find(needle) if needle else -1
    if at < 0:
        return 0
    end = at + len(needle)
    return next((n for n, p in enumerate(parts) if p.start <= at and end <= p.end), 0)


def describe_passage(text: str, number: int) -> dict[str, int | str]:
    """Passage `number` of a text (0 is the first) as explain shows it: which of how many, where,
    and its beginning."""
    parts = passages(text)
    if not 0 <= number < len(parts):  # the text changed since it was embedded
        return {"passage": number}
    part = parts[number]
    return {"passage": number, "passages": len(parts), "start": part.start, "end": part.end,
            "passage_text": part.text[:EXCERPT_CHARS]}


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-blank line, surrounding whitespace left out."""
    spans = [_trim(text, m.start(), m.end()) for m in re.finditer(r"[^\n]+", text)]
    return [(start, end) for start, end in spans if end > start]


def _fitted(text: str, start: int, end: int, budget: int) -> list[tuple[int, int, int]]:
    """(start, end, tokens) units of one line, each within the budget: the line, else its
    sentences, else pieces of a sentence cut at the budget."""
    tokens = estimated_tokens(text[start:end])
    if tokens <= budget:
        return [(start, end, tokens)]
    units: list[tuple[int, int, int]] = []
    for s_start, s_end in _sentences(text, start, end):
        s_tokens = estimated_tokens(text[s_start:s_end])
        if s_tokens <= budget:
            units.append((s_start, s_end, s_tokens))
        else:
            units.extend(_cut(text, s_start, s_end, budget))
    return units


def _sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans, at = [], start
    for m in _SENTENCE_END.finditer(text, start, end):
        if m.start() > at:
            spans.append((at, m.start()))
        at = m.end()
    if at < end:
        spans.append((at, end))
    return spans


def _cut(text: str, start: int, end: int, budget: int) -> list[tuple[int, int, int]]:
    """A sentence longer than the budget, in pieces of `budget` tokens, cut between tokens."""
    pieces, piece_start, count = [], start, 0
    for m in _TOKEN.finditer(text, start, end):
        cost = 1 if m.end() - m.start() == 1 else -(-(m.end() - m.start()) // 5)
        if count and count + cost > budget:
            pieces.append((piece_start, m.start(), count))
            piece_start, count = m.start(), 0
        count += cost
    pieces.append((piece_start, end, count))
    trimmed = [(*_trim(text, s, e), c) for s, e, c in pieces]
    return [(s, e, c) for s, e, c in trimmed if e > s]


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
