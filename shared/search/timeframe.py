"""The window of time a question asks about, read from its words, Chinese and English.

Named periods (tomorrow, this weekend, next week, next month, in March, last week; 明天, 这周末,
下周, 下个月, 三月, 上周) are the time parser's (shared/extract/time_expressions.py), read
against the moment the question is asked. Ranges counted from now are read here: the next
three weeks, the coming days, the past few weeks, within a week; 接下来一个月, 未来两周,
最近三天, 一周内; and words without a count: coming up, upcoming, 接下来, 即将 (from now on);
recently, lately, 最近, 近来 (the last RECENT_DAYS, or the next ones in a question about plans).

A question is an agenda question when, its time words aside, it says nothing more specific than
"what do I have", "anything to do", "我有什么安排" (AGENDA_WORDS): it asks for whatever happens
in the window. Recall lists those (shared/search/happening.py); any other question with a window
("when is my haircut next month?") only prefers what happens in it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo

from shared.extract.time_calendar import midnight, period, shift
from shared.extract.time_expressions import find_expressions
from shared.extract.time_words import EN_COUNT, ZH_COUNT, ZH_UNIT, ZH_UNITS, en_number, zh_number
from shared.search.intent import has_cue

MAX_QUESTION_CHARS = 2000  # a question's time words are in its first lines (a long query is a transcript)
RECENT_DAYS = 30  # "recently": about a month, either way
FEW = 3  # "the next few days", "the coming weeks", 接下来几天

# What a question asking for "whatever happens then" is made of besides time words and stop
# words (the segmenter drops "what", "do", "I", "have", 有, 什么, 要).
AGENDA_WORDS = frozenset((
    "anything", "something", "things", "thing", "stuff", "need", "needs", "plan", "plans", "planned",
    "planning", "schedule", "scheduled", "calendar", "agenda", "appointment", "appointments", "event",
    "events", "happen", "happens", "happening", "happened", "going", "coming", "busy", "free", "due",
    "todo", "tasks", "task", "reminders", "remind", "lined", "done", "list",
    "做", "干", "干嘛", "啥", "哪些", "事", "事情", "安排", "计划", "打算", "日程", "行程", "忙", "空",
    "活动", "待办", "发生", "约", "有事", "要事", "做些", "干些", "哪些事", "什么事", "我要", "要去", "去哪",
    "去哪儿", "哪儿", "哪里", "还有", "有空", "事要"))

_AMOUNT_EN = rf"(?P<n>{EN_COUNT[1:-1]}|few|several)"
_UNIT_EN = r"(?P<unit>day|week|month|year)"
_AMOUNT_ZH = rf"(?P<n>{ZH_COUNT[1:-1]}|几)"
_UNIT_ZH = rf"(?P<unit>{ZH_UNIT[1:-1]})"
# (pattern, which way from now: 0 both, 这几天). Plural units only where a singular is a named
# period (next week).
_COUNTED = (
    (re.compile(rf"这{_AMOUNT_ZH}\s*(?P<unit>天|日)"), 0),
    (re.compile(rf"\b(?:the\s+)?(?:past|last|previous)\s+(?:{_AMOUNT_EN}\s+)?{_UNIT_EN}s\b", re.I), -1),
    (re.compile(rf"\b(?:in|over|during|within)\s+the\s+past\s+(?P<n>){_UNIT_EN}\b", re.I), -1),
    (re.compile(rf"(?:过去|最近|近|前)的?\s*{_AMOUNT_ZH}\s*{_UNIT_ZH}"), -1),
    (re.compile(rf"\b(?:the\s+)?(?:next|coming|following|upcoming)\s+(?:{_AMOUNT_EN}\s+)?{_UNIT_EN}s\b", re.I), 1),
    (re.compile(rf"\bwithin\s+(?:the\s+next\s+)?(?:{_AMOUNT_EN}\s+){_UNIT_EN}s?\b", re.I), 1),
    (re.compile(rf"(?:接下来|未来|今后|往后|之后)的?\s*{_AMOUNT_ZH}\s*{_UNIT_ZH}"), 1),
    (re.compile(rf"{_AMOUNT_ZH}\s*{_UNIT_ZH}(?:之内|以内|内)"), 1),
)
_FROM_NOW_ON = re.compile(r"\b(?:coming\s+up|upcoming|in\s+the\s+future|from\s+now\s+on|next\s+up|soon)\b|"
                          r"接下来|未来|今后|往后|即将|马上|快要", re.I)
_RECENT = re.compile(r"\b(?:recently|lately|of\s+late|recent)\b|最近|近来|近期|这段时间|这阵子|前阵子|前段时间", re.I)
# A question about what was (did I, 了, 上次): a bare "Friday" or 三月 is the last one.
_PAST = re.compile(r"\b(?:did|was|were|went|had|happened|ago)\b|了|上次|以前|之前|过去", re.I)


@dataclass(frozen=True)
class Window:
    """A stretch of time in epoch seconds: from `start` (inclusive) to `end` (exclusive); None
    is open on that side."""

    start: float | None
    end: float | None

    def holds(self, moment: float) -> bool:
        return (self.start is None or moment >= self.start) and (self.end is None or moment < self.end)

    def covers(self, first: float, end: float) -> bool:
        """Whether the span [first, end) lies inside."""
        return (self.start is None or first >= self.start) and (self.end is None or end <= self.end)


@dataclass(frozen=True)
class TimeQuestion:
    """What a question asks of time. agenda: it asks for whatever happens in the window; ahead:
    the window reaches past now (what is coming is listed soonest first); explicit: the caller
    gave the window (happens_after / happens_before): a filter, not only a preference."""

    window: Window
    agenda: bool
    ahead: bool
    explicit: bool = False


def anchor_of(now: float, zone: tzinfo = timezone.utc) -> datetime:
    """The moment a question is asked, on the user's clock (shared/time_zone.py): "tomorrow"
    and "next week" are the user's, as the atoms stage reads plans on it."""
    return datetime.fromtimestamp(now, zone)


def epoch_of(moment: datetime) -> float:
    """A parser's time as epoch seconds (an aware one as it says; naive: UTC)."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def explicit(after: float | None, before: float | None, question: str, terms_of: Callable[[str], list[str]],
             now: float, zone: tzinfo = timezone.utc) -> TimeQuestion:
    """The caller's window on when things happen, with what the question asks of it."""
    asked = read(question, terms_of, now, zone=zone)
    agenda = asked.agenda if asked is not None else _is_agenda(question, [], terms_of)
    return TimeQuestion(Window(after, before), agenda, _ahead(before, now), True)


def read(question: str, terms_of: Callable[[str], list[str]], now: float,
         plan_cues: Sequence[str] = (), zone: tzinfo = timezone.utc) -> TimeQuestion | None:
    """The window a question's time words name (several: the stretch from the first to the last),
    or None when it names none. plan_cues: words of a question about plans ("recently" then
    looks ahead); zone: the user's clock."""
    question = question[:MAX_QUESTION_CHARS]
    anchor = anchor_of(now, zone)
    past = bool(_PAST.search(question))
    taken: list[tuple[int, int]] = []
    spans = _counted(question, anchor, taken)
    named = [e for e in find_expressions(question, anchor, past) if e.precision != "moment"]
    if not (spans or named or _FROM_NOW_ON.search(question) or _RECENT.search(question)):
        return None
    agenda = _is_agenda(question, taken + [(e.start, e.end) for e in named], terms_of)
    for e in named:
        if (agenda or not e.plan_only) and _free(taken, e.start, e.end):
            taken.append((e.start, e.end))
            last = max(e.due, period(e.first, e.precision)[1]) if e.precision in ("week", "weekend", "month", "year") \
                else e.due
            spans.append((epoch_of(e.first), epoch_of(midnight(last) + timedelta(days=1))))
    if not spans:  # "recently" beside a date is no second window
        spans = _open(question, now, taken, past or not has_cue(question, plan_cues))
    if not spans:
        return None
    ends = [end for _, end in spans]
    window = Window(min(start for start, _ in spans), None if None in ends else max(e for e in ends if e is not None))
    return TimeQuestion(window, agenda, _ahead(window.end, now))


def _ahead(end: float | None, now: float) -> bool:
    """Whether a window ending at `end` reaches past now (one ending now, "the past days", does not)."""
    return end is None or end > now + 1.0


def _counted(question: str, anchor: datetime, taken: list[tuple[int, int]]) -> list[tuple[float, float | None]]:
    """The ranges counted from now: through the end of the last day counted."""
    spans: list[tuple[float, float | None]] = []
    for pattern, way in _COUNTED:
        for m in pattern.finditer(question):
            if not _free(taken, m.start(), m.end()):
                continue
            taken.append(m.span())
            n, unit = _amount(m.group("n")), ZH_UNITS.get(m.group("unit")) or m.group("unit").lower()
            today = midnight(anchor)
            start = anchor if way > 0 else shift(today, -n, unit)
            end = anchor if way < 0 else shift(today, n, unit) + timedelta(days=1)
            spans.append((epoch_of(start), epoch_of(end)))
    return spans


def _open(question: str, now: float, taken: list[tuple[int, int]], back: bool) -> list[tuple[float, float | None]]:
    """From now on (coming up, 接下来), or the recent days (recently, 最近): back or ahead."""
    spans: list[tuple[float, float | None]] = []
    for m in _FROM_NOW_ON.finditer(question):
        if _free(taken, m.start(), m.end()):
            taken.append(m.span())
            spans.append((now, None))
    for m in _RECENT.finditer(question):
        if _free(taken, m.start(), m.end()):
            taken.append(m.span())
            spans.append((now - RECENT_DAYS * 86_400.0, now) if back else (now, now + RECENT_DAYS * 86_400.0))
    return spans


def _amount(word: str | None) -> int:
    """A range's count: none said (the coming weeks) is a few; an empty one (the past week) 1."""
    if word is None or word.lower() in ("few", "several", "几"):
        return FEW
    if not word:
        return 1
    number = zh_number(word) if not word.isascii() or word.isdigit() else en_number(word)
    return max(1, min(number or 1, 1000))


def _free(taken: list[tuple[int, int]], start: int, end: int) -> bool:
    return all(end <= s or start >= e for s, e in taken)


def _is_agenda(question: str, spans: list[tuple[int, int]], terms_of: Callable[[str], list[str]]) -> bool:
    """Whether, its time words (spans) blanked, the question holds nothing but AGENDA_WORDS and
    stop words."""
    text = list(question)
    for start, end in spans:
        text[start:end] = " " * (end - start)
    rest = "".join(text)
    rest = _FROM_NOW_ON.sub(" ", _RECENT.sub(" ", rest))
    return all(term in AGENDA_WORDS for term in terms_of(rest))
