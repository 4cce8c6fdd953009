"""Which turns of a conversation state something about a person, and how each becomes a
stand-alone key fact.

A turn is read into its content statements: sentences that are not questions, greetings or
small talk ("Thanks, Mel!", "That sounds great!"), with leading interjections taken off. Each
statement is typed by the atom rules (AtomRules.classify) and its dates found by the time
parser. A turn is a key fact when its score reaches a threshold; the score adds up what marks
a statement about oneself — first-person words (outside sentences addressed to "you"),
length, statements the atom rules type, answering a question just asked, a date, a shared
photo. The weights are FactWeights; scripts/bench_summarize.py chooses them on folds of LoCoMo
it then does not score on. In a conversation unlike LoCoMo's (Chinese, or short turns), a
first-person statement is a key fact whatever its score.

A chosen turn gives one key fact per stated fact: each statement about a person (first person,
a type by the atom rules, a date) starts one; a statement that states nothing of its own ("It
was so much fun.", "She is grey.") stays with the fact it goes on from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from shared.extract.atomize import AtomRules, sentences, word_count
from shared.extract.subjects import ASSISTANT, role_of
from shared.extract.timeparse import DateMention, date_mentions
from shared.summarize.conversation import Turn
from shared.summarize.rewrite import about_speaker

_IMAGE = re.compile(r"\[\s*shares?\s+(?:an?\s+)?(?:image|photo|picture)s?\s*:\s*([^\]]*)\]", re.I)
_QUESTION_ZH = re.compile(r"[吗呢么][\s。.!！~～]*$")
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|mine|myself|we|we're|we've|we'll|our|ours|us|ourselves)\b"
                           r"|我(?!们)|我们|咱们", re.I)
_SECOND_PERSON = re.compile(r"\b(?:you|your|you're|you've|you'll|yours|yourself)\b|你|您", re.I)
# Words said before the point ("Wow, ...", "Hey Mel! ...", "Also, ...", "哈哈，...", "对了，..."), taken
# off the start of a statement so that its fact starts with what was stated. Interjections and
# discourse openers go whatever follows them; words that also begin statements of their own ("So
# many came", "No one came", "Thanks to her", "还有三天", "对我来说") only before a pause, or (the
# English ones and the Chinese conjunctions) before a first-person subject ("So I went").
_OPENERS_EN = (r"hey|hi|hello|wow|whoa|oh|ooh|ah|aw+|yeah|yep|yup|ha(?:ha)+|lol|ok|okay|hmm+|um+|uh|omg|btw|"
               r"by the way|anyway|anyways|also|oh and|and also|honestly|actually|speaking of which|"
               r"on another note|guess what")
_PAUSED_EN = (r"so|well|yes|no|nope|sure|thanks|thank you|cool|great|awesome|nice|man|dude|totally|"
              r"definitely|absolutely|plus|besides|and|but|right|alright|you know|i mean")
_OPENERS_ZH = (r"哈哈+|嗯+|哇+|嗨|哎+|唉+|啊+|哦+|噢+|呃+|诶|欸|喔|另外|对了|顺便说一下|顺便说|"
               r"话说|其实|而且|此外|总之|说起来|说到这个|然后")
_PAUSED_ZH = r"好的|好啊|是啊|是的|对啊|对呀|对|没错|谢谢"
_CONJUNCTIONS_ZH = r"还有|所以|不过|但是|反正|那个|顺便"
_PAUSE = r"(?=\s*[,，!！.。:：;；~～—–-])"
_LEADING = re.compile(
    rf"^(?:(?:{_OPENERS_EN})\b[\s,!.:;~-]*"
    rf"|(?:{_PAUSED_EN})\b(?:{_PAUSE}|(?=\s+(?:i|we)(?:'[a-z]+)?\b))[\s,!.:;~-]*"
    rf"|(?:{_OPENERS_ZH})[\s，,！!。~～]*"
    rf"|(?:{_PAUSED_ZH}){_PAUSE}[\s，,！!。~～]*"
    rf"|(?:{_CONJUNCTIONS_ZH})(?:{_PAUSE}|(?=我))[\s，,！!。~～]*)+", re.I)
# The same words taken off whatever follows: only to tell small talk ("So glad you came!", "Great
# to hear!"), never to cut a fact.
_ANY_LEADING = re.compile(rf"^(?:(?:{_OPENERS_EN}|{_PAUSED_EN})\b[\s,!.:;~-]*"
                          rf"|(?:{_OPENERS_ZH}|{_PAUSED_ZH}|{_CONJUNCTIONS_ZH})[\s，,！!。~～]*)+", re.I)
# Whole sentences that keep a conversation going and state nothing about anyone.
_SMALL_TALK = re.compile(
    r"^(?:that(?:'s| is| was| sounds| must)|this (?:is|sounds)|it (?:sounds|must)|sounds|good luck|"
    r"congrats|congratulations|thanks|thank you|glad|take care|talk (?:to you )?(?:soon|later)|see you|"
    r"bye|have (?:a|fun)|me too|same here|agreed?|exactly|true|you(?:'re| are) (?:so |really )?"
    r"(?:right|welcome|the best|amazing|awesome|doing)|keep (?:it )?up|keep going|no worries|"
    r"no problem|anytime|of course|you got this|you should|you can|good (?:to|for) you|"
    r"(?:good|nice|great) to (?:see|meet|hear from|chat with) you|long time no see|"
    r"你好|再见|拜拜|晚安|早安|没问题|不客气|没关系|太好了|真棒|加油|恭喜|好久不见)", re.I)
_TALK_ABOUT_TALK = re.compile(
    r"\b(?:i(?:'m| am) (?:so |really )?(?:glad|happy for you|proud of you|sure you)|i agree|i bet|"
    r"i hope you|let me know|let's|i can't wait to (?:see|hear)|i appreciate|means (?:a lot|so much) to me|"
    r"i know what you mean|i hear you|i get (?:it|that)|i think so|i think (?:it|that|this)(?:'s| is| was))\b"
    r"|^我(?:也|还|真的?)?(?:觉得|认为|相信|猜|知道|明白|理解|同意|懂)(?=这|那|它|是|了|的|挺|不错|[。！!]|$)"
    r"|^我也(?:是|一样|这么)|我(?:可以|能)想象", re.I)
# A statement that starts by pointing at what was just said goes on from it.
_REFERS_BACK = re.compile(r"^(?:it|it's|its|that|that's|this|these|those|they|they're|them|their|she|she's|"
                          r"he|he's|her|his|there|there's)\b|^[它他她这那]", re.I)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")
_ADDRESS = re.compile(r"^(\w{3,})\s*[,!，！]\s*")
MIN_STATEMENT_WORDS = 3
# The weights were chosen on LoCoMo: English, turns of 9 to 30 words (median per session). In a
# Chinese conversation (two characters count as a word, which undercounts it) or a chat of
# shorter turns, length tells little, and a first-person statement that the atom rules type is
# a fact by itself. Set below LoCoMo's range, not tuned: the benchmark cannot see it.
SHORT_CHAT_WORDS = 8
# LoCoMo's sessions have 13 turns or more: a chat of fewer turns than this (a host handing over
# a few exchanges) is outside the weights' range too. Also untuned, and never met on LoCoMo.
SHORT_CHAT_TURNS = 8
CAP_FIRST_PERSON, CAP_WORDS, CAP_TYPED = 4, 50, 2


@dataclass(frozen=True)
class FactWeights:
    """What each mark of a statement about oneself adds to a turn's score, and the score a
    turn needs to be a key fact (chosen by scripts/bench_summarize.py on held-out folds)."""

    first_person: float = 1.0  # per first-person word, up to CAP_FIRST_PERSON (the unit)
    words: float = 1.5         # per ten words of content statements, up to CAP_WORDS words
    typed: float = 0.5         # per statement the atom rules type, up to CAP_TYPED
    answer: float = 3.0        # the turn answers a question of the turn before
    dated: float = 2.0         # a statement names a date the time parser resolves
    image: float = 1.0         # the turn shares a photo
    threshold: float = 5.35


@dataclass(frozen=True)
class Statement:
    text: str
    atom_type: str
    words: int
    first_person: int
    dates: tuple[DateMention, ...]


@dataclass(frozen=True)
class TurnReading:
    """One turn as the fact rules see it."""

    index: int
    turn: Turn
    statements: tuple[Statement, ...]
    image: str | None
    answers: bool
    anchor: datetime | None
    untuned: bool  # a conversation unlike the weights' (Chinese, or short turns): see SHORT_CHAT_WORDS
    features: dict[str, float] = field(default_factory=dict)

    @property
    def about_self(self) -> bool:
        """A first-person statement, in a conversation where that alone makes a fact (untuned).
        Its type is not asked: the atom rules leave most of what a person says of themself
        untyped ("我最近开始学游泳了，每周去两次", "I've been learning the guitar"), and what a
        first-person sentence says that is not about its speaker (agreeing, thanking, opinions
        on what was just said) the statement filters have taken out."""
        return self.untuned and any(s.first_person for s in self.statements)


@dataclass(frozen=True)
class KeyFact:
    turn_index: int
    text: str
    atom_type: str  # the type the atom rules give most of its statements
    dated: bool     # it names a date the time parser resolved
    score: float


def read_turns(turns: list[Turn], rules: AtomRules) -> list[TurnReading]:
    """Every turn read into its content statements and features, dates resolved against the
    turn's time or the latest time seen before it."""
    read, anchor, asked = [], None, False
    speakers = tuple(dict.fromkeys(t.speaker.casefold() for t in turns))
    for turn in turns:
        anchor = turn.time or anchor
        text = turn.text.replace("’", "'")
        image = _IMAGE.search(text)
        said = sentences(_IMAGE.sub(" ", text))
        statements = tuple(s for s in (_statement(x, rules, anchor, speakers) for x in said) if s)
        read.append((turn, statements, image.group(1).strip() if image else None, asked, anchor))
        asked = any(_is_question(s) for s in said)
    lengths = sorted(sum(s.words for s in statements) for _, statements, *_ in read if statements)
    untuned = (is_chinese(turns) or len(turns) < SHORT_CHAT_TURNS
               or (bool(lengths) and lengths[len(lengths) // 2] < SHORT_CHAT_WORDS))
    return [TurnReading(i, turn, statements, image, answers, anchor, untuned,
                        _features(statements, answers, image is not None))
            for i, (turn, statements, image, answers, anchor) in enumerate(read)]


def _statement(sentence: str, rules: AtomRules, anchor: datetime | None,
               speakers: tuple[str, ...]) -> Statement | None:
    if _is_question(sentence) or _SMALL_TALK.match(sentence) or _SMALL_TALK.match(_ANY_LEADING.sub("", sentence)):
        return None
    text = _without_address(_LEADING.sub("", sentence).strip(), speakers)
    words = word_count(text)
    if words < MIN_STATEMENT_WORDS or _SMALL_TALK.match(text) or _TALK_ABOUT_TALK.search(text):
        return None
    atom_type, _ = rules.classify(text)
    dates = tuple(date_mentions(text, anchor, past=atom_type != "planned")) if anchor else ()
    first = 0 if _SECOND_PERSON.search(text) else len(_FIRST_PERSON.findall(text))
    return Statement(text, atom_type, words, first, dates)


def _without_address(text: str, speakers: tuple[str, ...]) -> str:
    """"Mel, that sounds great" -> "that sounds great": a speaker's name (or its start) said first."""
    m = _ADDRESS.match(text)
    if m and any(s.startswith(m.group(1).casefold()) for s in speakers):
        return _LEADING.sub("", text[m.end():]).strip()
    return text


def spoken_sentences(text: str) -> list[str]:
    """A turn's sentences, a shared photo's markup reduced to its caption."""
    text = _IMAGE.sub(lambda m: f" {m.group(1).strip()}. ", text.replace("’", "'"))
    return sentences(text)


def is_chinese(turns: list[Turn]) -> bool:
    text = "".join(t.text for t in turns)
    cjk = len(_CJK.findall(text))
    return cjk > 0 and cjk * 3 >= len(_LATIN.findall(text))


def _is_question(sentence: str) -> bool:
    s = sentence.rstrip()
    return s.endswith(("?", "？")) or bool(_QUESTION_ZH.search(s))


def _features(statements: tuple[Statement, ...], answers: bool, image: bool) -> dict[str, float]:
    if not statements:
        return {"first_person": 0, "words": 0, "typed": 0, "answer": 0, "dated": 0, "image": 0}
    return {
        "first_person": min(sum(s.first_person for s in statements), CAP_FIRST_PERSON),
        "words": min(sum(s.words for s in statements), CAP_WORDS) / 10,
        "typed": min(sum(s.atom_type != "unknown" for s in statements), CAP_TYPED),
        "answer": float(answers),
        "dated": float(any(s.dates for s in statements)),
        "image": float(image)}


def score(reading: TurnReading, weights: FactWeights) -> float:
    return sum(getattr(weights, name) * value for name, value in reading.features.items())


def is_fact(reading: TurnReading, weights: FactWeights) -> bool:
    return bool(reading.statements) and (reading.about_self or score(reading, weights) >= weights.threshold)


def key_facts(readings: list[TurnReading], weights: FactWeights, limit: int) -> list[KeyFact]:
    """One key fact per stated fact of the turns that are facts (the best-scored turns' first,
    `limit` in all), in conversation order, each rewritten with its speaker as subject and its
    dates resolved; none of a transcript's assistant."""
    speakers = list(dict.fromkeys(r.turn.speaker for r in readings))
    # What an assistant says (suggestions, checklists, "Noted") is no fact about the user.
    scored = sorted(((score(r, weights), r) for r in readings
                     if is_fact(r, weights) and role_of(r.turn.speaker) != ASSISTANT),
                    key=lambda p: (-p[0], p[1].index))
    facts = [fact for value, reading in scored for fact in _facts_of(reading, value, speakers)][:limit]
    return sorted(facts, key=lambda f: f.turn_index)  # stable: a turn's facts keep their order


def _facts_of(reading: TurnReading, value: float, speakers: list[str]) -> list[KeyFact]:
    """A turn's stated facts; a shared photo goes with the last (it shows what was just said)."""
    other = next((s for s in speakers if s != reading.turn.speaker), None) if len(speakers) == 2 else None
    groups = stated_facts(reading.statements)
    facts = []
    for n, group in enumerate(groups):
        image = reading.image if n == len(groups) - 1 else None
        text = about_speaker([(s.text, s.dates) for s in group], image, reading.turn.speaker, other)
        facts.append(KeyFact(reading.index, text, _main_type(group), any(s.dates for s in group), round(value, 3)))
    return facts


def stated_facts(statements: tuple[Statement, ...]) -> list[list[Statement]]:
    """The statements grouped one stated fact each: a statement about a person starts a fact;
    one that states nothing of its own or refers back ("It was fun.", "She is grey.") joins the
    fact before it, or, first in its turn, the one after."""
    groups: list[list[Statement]] = []
    for statement in statements:
        if groups and not _states_a_fact(statement):
            groups[-1].append(statement)
        else:
            groups.append([statement])
    if len(groups) > 1 and not _states_a_fact(groups[0][0]):
        groups = [groups[0] + groups[1], *groups[2:]]
    return groups


def _states_a_fact(statement: Statement) -> bool:
    about_someone = statement.first_person or statement.atom_type != "unknown" or statement.dates
    return bool(about_someone) and not _REFERS_BACK.match(statement.text)


def _main_type(statements: Sequence[Statement]) -> str:
    typed = [s.atom_type for s in statements if s.atom_type != "unknown"]
    return max(typed, key=typed.count) if typed else "unknown"
