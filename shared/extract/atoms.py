"""Memory atoms from a memory, by rules: facts, their type, confidence, slots, deadline, TTL.

The rules are data (shared/resources/atom_rules.yaml, extensible with atoms.rules_file);
this module only applies them. Zero model calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from shared.config import AtomsConfig
from shared.errors import ConfigError
from shared.store.atoms import ATOM_TYPES
from shared.store.documents import Document, unmarked

# The types rules can give (ATOM_TYPES without "unknown", which is what no rule gives).
TYPES = tuple(t for t in ATOM_TYPES if t != "unknown")
MAX_FACTS = 8
MIN_FACT_WORDS = 4
# Words for the size of a statement: Latin words, or Chinese characters two to a word.
_WORDS = re.compile(r"[A-Za-z0-9']+|[\u4e00-\u9fff]{2}")
_SPEAKER = re.compile(r"^\s*([^:：\n]{1,40}?)\s*[:：]\s*(?=\S)")
_SENTENCE = re.compile(r"(?<=[。！？!?；;])|(?<=\.)\s+|\n+")


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern
    weight: float


@dataclass(frozen=True)
class SlotRule:
    pattern: re.Pattern
    attribute: str


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

    def __init__(self, raw: dict):
        self.types = {name: [Rule(re.compile(r["pattern"], re.I), float(r["weight"]))
                             for r in raw.get("types", {}).get(name, [])] for name in TYPES}
        self.slots = [SlotRule(re.compile(r["pattern"], re.I), r["attribute"])
                      for r in raw.get("slots", [])]

    @classmethod
    def load(cls, extra_file: Path | None = None) -> "AtomRules":
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
        try:
            return cls(raw)
        except (re.error, KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"atom rules: {exc}") from exc

    def classify(self, text: str) -> tuple[str, float]:
        """(type, confidence): the type whose rules weigh most; 'unknown' when none match."""
        scores = {name: sum(rule.weight for rule in rules if rule.pattern.search(text))
                  for name, rules in self.types.items()}
        best = max(scores, key=lambda name: scores[name])
        if scores[best] <= 0:
            return "unknown", 0.2
        # Evidence for one type, little for the others: confident.
        confidence = scores[best] / (sum(scores.values()) + 0.5)
        return best, round(min(0.95, max(0.3, confidence)), 3)

    def slots_of(self, fact: str, speaker: str | None) -> tuple[str, str, str] | None:
        """(subject, attribute, value) when a trusted pattern matches the fact, else None."""
        for rule in self.slots:
            m = rule.pattern.search(fact.strip())
            if m:
                groups = m.groupdict()
                attribute = groups.get("attribute") or ""
                attribute = f"{rule.attribute}:{attribute.strip().lower()}" if attribute else rule.attribute
                value = re.sub(r"\s+", " ", groups["value"]).strip().lower()
                subject = (groups.get("subject") or speaker or "self").strip().lower()
                return subject, attribute, value
        return None


def speaker_of(document: Document) -> str | None:
    """The speaker of a one-line "Name: text" memory, else None."""
    return split_facts(document)[0]


def split_facts(document: Document) -> tuple[str | None, list[str]]:
    """(speaker, facts): the key facts when given, else the content's statements."""
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
                  and word_count(s) >= MIN_FACT_WORDS]
    return speaker, (statements or [text.strip()])[:MAX_FACTS]


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


def draft_atoms(document: Document, rules: AtomRules, config: AtomsConfig) -> list[AtomDraft]:
    """The atoms of one memory."""
    from shared.extract.timeparse import deadline as find_deadline

    speaker, facts = split_facts(document)
    anchor = document.fields.original_time or datetime.fromtimestamp(document.create_time, timezone.utc)
    anchor_naive = anchor.replace(tzinfo=None)
    drafts = []
    for fact in facts:
        atom_type, confidence = rules.classify(fact)
        due = find_deadline(fact, anchor_naive) if atom_type == "planned" else None
        slots = rules.slots_of(fact, speaker) or (None, None, None)
        drafts.append(AtomDraft(
            text=f"{speaker}: {fact}" if speaker else fact, type=atom_type, confidence=confidence,
            subject=slots[0], attribute=slots[1], value=slots[2],
            deadline=_epoch(due, anchor) if due else None,
            ttl_days=ttl_days(atom_type, document.fields.importance, 0, config)))
    return drafts


def _epoch(moment: datetime, anchor: datetime) -> float:
    return moment.replace(tzinfo=anchor.tzinfo or timezone.utc).timestamp()
