"""Memory atoms from a memory, by rules: facts, their type, confidence, slots, deadline, TTL.

The rules are data (shared/resources/atom_rules.yaml, extensible with atoms.rules_file);
this module only applies them. Zero model calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from importlib import resources
from pathlib import Path

from shared.config import AtomsConfig
from shared.errors import ConfigError
from shared.extract.subjects import subjects_of
from shared.extract.timeparse import deadline as find_deadline
from shared.memory_rules import EARLIEST_YEAR, LATEST_YEAR
from shared.store.model.atoms import ATOM_TYPES
from shared.store.model.documents import Document, unmarked
from shared.text.passages import passages
from shared.time_zone import machine_zone, on_clock

# The types rules can give (ATOM_TYPES without "unknown", which is what no rule gives).
TYPES = tuple(t for t in ATOM_TYPES if t != "unknown")
MAX_FACTS = 8
# Types of statements that tell what happened rather than what holds: a long memory's facts
# are chosen among the others first.
PASSING_TYPES = ("episodic", "unknown")
MIN_FACT_WORDS = 4
# Words for the size of a statement: Latin words, or Chinese characters two to a word.
_WORDS = re.compile(r"[A-Za-z0-9']+|[\u4e00-\u9fff]{2}")
_SPEAKER = re.compile(r"^\s*([^:：\n]{1,40}?)\s*[:：]\s*(?=\S)")
# A full stop ends a sentence unless it ends a title or an initial (Dr. Lee, Mrs. Brown, J. Smith)
# or a.m. / p.m. before a small letter: those cuts left a name or a time as a fragment too small
# to keep, and with it the fact.
_SENTENCE = re.compile(r"(?<=[。！？!?；;])|(?<!\b[A-Z]\.)(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bSt\.)"
                       r"(?<!\bMrs\.)(?<!\bProf\.)(?<!\bvs\.)(?<!\be\.g\.)(?<!\bi\.e\.)"
                       r"(?<!\b[ap]\.m\.(?=\s[a-z]))(?<=\.)\s+|\n+")


# A time said before a statement ("Last month, we moved ...", 上个月我们搬到了 ...): the slots
# read the statement after it.
_OPENING_TIME = re.compile(r"^\s*(?:(?:last|this|earlier this)\s+(?:week|month|year|spring|summer|autumn|fall|winter)"
                           r"|(?:yesterday|today|recently|finally|so|well|also|and)\b)[\s,]*"
                           r"|^\s*(?:上个?月|上周|上星期|去年|今年|昨天|前天|最近|刚刚|终于|前不久)[，,\s]*", re.I)


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern
    weight: float


@dataclass(frozen=True)
class SlotRule:
    pattern: re.Pattern
    attribute: str


@dataclass(frozen=True)
class RuleWeights:
    """The rules' free constants (atom_rules.yaml "weights"; scripts/bench_atoms.py chooses them)."""

    future_time: float = 0.6  # planned, for a time ahead with nothing else saying it is a plan
    plan_with_time: float = 2.0  # planned, for a time ahead with a verb or a planned rule
    descriptive: float = 0.4  # factual, for a plain statement that nothing more specific fits
    min_descriptive_words: int = 2


# The lists of cue patterns besides the types' rules (atom_rules.yaml explains each).
CUE_LISTS = ("plan_times", "plan_verbs", "not_plan_cues", "small_talk")


@dataclass(frozen=True)
class AtomDraft:
    """An atom before it is stored: what the rules made of one fact."""

    text: str
    type: str
    confidence: float
    subject: str | None
    attribute: str | None
    value: str | None
    deadline: float | None  # epoch seconds, planned atoms only
    ttl_days: float


class AtomRules:
    """Compiled rules; build once (at process start) and share."""

    def __init__(self, raw: dict, weights: RuleWeights | None = None):
        self.types = {name: [Rule(re.compile(r["pattern"], re.I), float(r["weight"]))
                             for r in raw.get("types", {}).get(name, [])] for name in TYPES}
        self.slots = [SlotRule(re.compile(r["pattern"], re.I), r["attribute"])
                      for r in raw.get("slots", [])]
        self.cues = {name: [re.compile(p, re.I) for p in raw.get(name) or []] for name in CUE_LISTS}
        self.weights = weights or RuleWeights(**(raw.get("weights") or {}))
        self._raw = raw

    def with_weights(self, weights: RuleWeights) -> AtomRules:
        """The same rules with other constants (what a benchmark tries)."""
        return AtomRules(self._raw, weights)

    @classmethod
    def load(cls, extra_file: Path | None = None) -> AtomRules:
        import yaml

        raw = yaml.safe_load(resources.files("shared.resources").joinpath("atom_rules.yaml")
                             .read_text(encoding="utf-8"))
        if extra_file is not None:
            try:
                extra = yaml.safe_load(Path(extra_file).read_text(encoding="utf-8")) or {}
            except (OSError, yaml.YAMLError) as exc:
                raise ConfigError(f"atoms.rules_file {extra_file}: {exc}") from exc
            for name, rules in (extra.get("types") or {}).items():
                if name not in TYPES:
                    raise ConfigError(f"atoms.rules_file: unknown atom type {name!r}; allowed: {', '.join(TYPES)}")
                raw["types"].setdefault(name, []).extend(rules)
            raw["slots"] = list(extra.get("slots") or []) + raw.get("slots", [])
            for name in CUE_LISTS:
                raw[name] = list(raw.get(name) or []) + list(extra.get(name) or [])
            raw["weights"] = {**(raw.get("weights") or {}), **(extra.get("weights") or {})}
        try:
            return cls(raw)
        except (re.error, KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"atom rules: {exc}") from exc

    def classify(self, text: str) -> tuple[str, float]:
        """(type, confidence): the type whose rules weigh most, a time ahead weighing for
        planned; 'unknown' when no rule matches (the summarizer counts typed statements)."""
        scores = {name: sum(rule.weight for rule in rules if rule.pattern.search(text))
                  for name, rules in self.types.items()}
        if self._cue("plan_times", text) and not self._cue("not_plan_cues", text):
            with_verb = scores["planned"] > 0 or self._cue("plan_verbs", text)
            scores["planned"] += self.weights.plan_with_time if with_verb else self.weights.future_time
        best = max(scores, key=lambda name: scores[name])
        if scores[best] <= 0:
            return "unknown", 0.2
        return best, _confidence(scores[best], scores)

    def atom_type(self, text: str) -> tuple[str, float]:
        """(type, confidence) of an atom: classify's, and when no rule matches, factual for a
        plain statement (a general or descriptive fact); unknown only when nothing fits."""
        found = self.classify(text)
        if found[0] != "unknown" or not self._descriptive(text):
            return found
        return "factual", _confidence(self.weights.descriptive, {"factual": self.weights.descriptive})

    def _cue(self, name: str, text: str) -> bool:
        return any(p.search(text) for p in self.cues[name])

    def _descriptive(self, text: str) -> bool:
        return (self.weights.descriptive > 0 and word_count(text) >= self.weights.min_descriptive_words
                and not text.rstrip().endswith(("?", "？")) and not self._cue("small_talk", text))

    def slots_of(self, fact: str, speaker: str | None) -> tuple[str, str, str] | None:
        """(subject, attribute, value) when a trusted pattern matches the fact, else None."""
        fact = _OPENING_TIME.sub("", fact)
        for rule in self.slots:
            m = rule.pattern.search(fact.strip())
            if m:
                groups = m.groupdict()
                attribute = groups.get("attribute") or ""
                attribute = f"{rule.attribute}:{attribute.strip().lower()}" if attribute else rule.attribute
                value = re.sub(r"\s+", " ", groups["value"]).strip().rstrip(".").lower()
                subject = (groups.get("subject") or speaker or "self").strip().lower()
                return subject, attribute, value
        return None


def _confidence(best: float, scores: dict[str, float]) -> float:
    """Evidence for one type, little for the others: confident."""
    return round(min(0.95, max(0.3, best / (sum(scores.values()) + 0.5))), 3)


def speaker_of(document: Document) -> str | None:
    """The speaker of a one-line "Name: text" memory, else None."""
    return split_facts(document)[0]


def split_facts(document: Document, rules: AtomRules | None = None) -> tuple[str | None, list[str]]:
    """(speaker, facts): the key facts when given, else the content's statements. A sentence
    too small to be a statement is still one when the rules give it a type (周五看牙医。)."""
    text = unmarked(document.text)
    speaker = None
    m = _SPEAKER.match(text)
    if m and len(text.splitlines()) == 1:
        speaker, text = m.group(1).strip(), text[m.end():]
    given = [unmarked(f) for f in document.fields.key_facts if f.strip()]
    if given:
        facts = [(_SPEAKER.sub("", f, count=1) if speaker else f).strip() for f in given]
        return speaker, facts[:MAX_FACTS]
    # Questions and small talk ("Hey Mel!", "Good to see you!") state nothing to remember.
    statements = [s for s in sentences(text) if not s.endswith(("?", "？")) and len(s) >= 4
                  and (word_count(s) >= MIN_FACT_WORDS or (rules and rules.classify(s)[0] != "unknown"))]
    if not statements:
        return speaker, [text.strip()]
    # A memory within one passage keeps its first statements, as people write what matters first.
    return speaker, chosen(statements, rules) if len(passages(text)) > 1 else statements[:MAX_FACTS]


def chosen(statements: list[str], rules: AtomRules | None) -> list[str]:
    """At most MAX_FACTS of a long memory's statements, in their order: those the rules give a
    lasting type (a plan, a preference, a relation, a fact) first, the rest (what happened, or
    untyped) spread evenly over the text, so its middle and end count as much as its start."""
    if len(statements) <= MAX_FACTS:
        return statements
    typed = [i for i, s in enumerate(statements) if rules and rules.classify(s)[0] not in PASSING_TYPES]
    picked = set(_spread(typed, MAX_FACTS))
    rest = [i for i in range(len(statements)) if i not in picked]
    picked |= set(_spread(rest, MAX_FACTS - len(picked)))
    return [statements[i] for i in sorted(picked)]


def _spread(items: list[int], count: int) -> list[int]:
    """`count` of the items (all when fewer), evenly spaced from the first on."""
    if count <= 0:
        return []
    if len(items) <= count:
        return items
    return [items[i * len(items) // count] for i in range(count)]


def sentences(text: str) -> list[str]:
    """The sentences of a text, stripped (Chinese and Latin sentence ends, line breaks)."""
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def word_count(text: str) -> int:
    """The size of a statement in words: Latin words, Chinese characters two to a word."""
    return len(_WORDS.findall(text))


def ttl_days(atom_type: str, importance: float, reinforcements: int, config: AtomsConfig) -> float:
    """base(type) x (0.5 + importance) x (1 + 0.5 x reinforcements)."""
    base = config.base_ttl_days(atom_type)
    return base * (0.5 + importance) * (1 + 0.5 * reinforcements)


def draft_atoms(document: Document, rules: AtomRules, config: AtomsConfig,
                zone: tzinfo | None = None) -> list[AtomDraft]:
    """The atoms of one memory; a plan's time read on `zone`'s clock (the user's,
    memory.time_zone; None: the machine's)."""
    speaker, facts = split_facts(document, rules)
    anchor = _anchor(document, zone or machine_zone())
    drafts = []
    for fact, subject in zip(facts, subjects_of(facts, speaker)):
        atom_type, confidence = rules.atom_type(fact)
        slots = rules.slots_of(fact, speaker) or (None, None, None)
        drafts.append(AtomDraft(
            text=f"{speaker}: {fact}" if speaker else fact, type=atom_type, confidence=confidence,
            subject=subject, attribute=slots[1], value=slots[2],
            deadline=_deadline(fact, anchor) if atom_type == "planned" else None,
            ttl_days=ttl_days(atom_type, document.fields.importance, 0, config)))
    return drafts


def _anchor(document: Document, zone: tzinfo) -> datetime:
    """When the memory was said, on the clock its words are read on (shared/time_zone.py); the
    time it was stored when it has none."""
    when = document.fields.original_time or datetime.fromtimestamp(document.create_time, timezone.utc)
    try:
        return on_clock(when, zone)
    except OverflowError:  # at the calendar's ends, where no expression is resolved anyway
        return when


def _deadline(fact: str, anchor: datetime) -> float | None:
    """When a plan falls due, as epoch seconds; None when it names no time, or one outside the
    years a memory's time may take (a plan "in 9000 years", or one of a memory stored before
    its time was checked): no deadline rather than one nothing downstream can show."""
    due = find_deadline(fact, anchor)
    if due is None or not EARLIEST_YEAR <= due.year <= LATEST_YEAR:
        return None
    return due.timestamp()
