"""A memory's knowledge-graph output, by rules: entity, topic and fact nodes, their edges, and
searchable entries. Zero model calls.

- entities: people, places, organisations and other named things (shared/extract/entities.py),
  from the memory's participants and speaker (people) and its facts; the self (I, my, 我) is
  the speaker of a "Name: text" memory, else one node per persona, "the user";
- relations: typed edges between entities (shared/extract/relations.py): "Mei is engaged to
  Tomas" is Tomas -fiance-> Mei; the inverse is known from the vocabulary, not stored;
- topics: the memory's topics plus its top keywords (jieba TF-IDF, nouns);
- facts: one node per atom; edges: describes (entity or topic -> each fact that mentions it,
  or every fact when none names it; the user's node -> the user's own facts only, by the atom's
  subject), mentioned_in (between the facts of one memory, in order),
  co_occurs_with (between the named entities and topics of one memory);
- entries: "Fact: ... Summary: ..." per fact (the persona summary, else the memory's text),
  the text the graph channels search.
Entity resolution: one canonical form per name (Unicode NFKC, so full-width becomes half-width;
case-folded; whitespace collapsed; config aliases), so one person never splits into two nodes.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from shared.config import GraphConfig
from shared.extract.entities import IMPORTED_KINDS, PERSON, EntityFinder, Mention, self_spans
from shared.extract.relations import Relation, find_relations
from shared.store.model.atoms import SELF_SUBJECT
from shared.store.model.documents import Document, unmarked
from shared.store.model.graph import SELF_CANONICAL, EdgeSpec, EntrySpec, MemoryGraph, NodeSpec
from shared.text.jieba_tables import keyword_extractor
from shared.text.segment import Segmenter

MAX_ENTITIES = 8
SUMMARY_CHARS = 160


@dataclass(frozen=True)
class StoredFact:
    """A stored atom, as the graph needs it."""

    atom_id: int
    text: str
    confidence: float
    subject: str | None = None  # whose fact it is (shared/extract/subjects.py); None: not read


def canonical(name: str, aliases: dict[str, str]) -> str:
    """The one form of a name that nodes are keyed on."""
    text = " ".join(unicodedata.normalize("NFKC", name).split())
    text = aliases.get(text, text)
    return text.casefold()


class GraphBuilder:
    """Builds MemoryGraph values; holds the entity finder and the jieba keyword helper."""

    def __init__(self, segmenter: Segmenter, config: GraphConfig):
        self.segmenter = segmenter
        self.config = config
        self.finder = EntityFinder(segmenter)
        self.aliases = {unicodedata.normalize("NFKC", a): n for a, n in config.alias_map().items()}
        self._lock = threading.Lock()
        self._tfidf = None

    def _keywords(self) -> Any:  # jieba's TFIDF extractor (jieba has no type hints)
        with self._lock:
            if self._tfidf is None:
                # Our tokenizer (custom words loaded) rather than jieba's global one.
                self._tfidf = keyword_extractor(self.segmenter.tokenizer(), self.finder.posseg())
        return self._tfidf

    def node(self, mention: Mention) -> NodeSpec:
        return NodeSpec(mention.type, mention.name, canonical(mention.name, self.aliases))

    def topics(self, document: Document, text: str, taken: set[str]) -> list[str]:
        keywords = self._keywords().extract_tags(text, topK=self.config.max_topics * 2,
                                                 allowPOS=("n", "nz", "ns", "vn", "eng"))
        # Latin-script keywords only when written as a proper noun or acronym in the text:
        # jieba tags every English word alike, verbs included.
        keywords = [k for k in keywords if k.lower() not in self.segmenter.stop_words
                    and canonical(k, self.aliases) not in taken
                    and (not k.isascii() or re.search(rf"\b{re.escape(k[:1].upper() + k[1:])}\b", text))]
        return _unique(list(document.fields.topics) + keywords[:self.config.max_topics],
                       lambda t: canonical(t, self.aliases))

    def build(self, document: Document, speaker: str | None, facts_in: list[StoredFact]) -> MemoryGraph:
        reading = _Reading(self, document, speaker)
        for index, fact in enumerate(facts_in):
            reading.read(index, fact.text)
        # "My wife Sarah loves orchids" names the user ("my"), but is Sarah's: the user's node
        # describes only the facts that are the user's own.
        reading.self_named -= {i for i, f in enumerate(facts_in) if f.subject not in (None, SELF_SUBJECT)}
        entities = reading.entities()
        # A keyword that is a word of a name ("Acme" of "Acme Corp") is that entity already.
        taken = {n.canonical for n in entities} | {w for n in entities for w in n.canonical.split()}
        taken |= {reading.persona} if reading.persona else set()
        topics = self.topics(document, unmarked(document.text), taken)
        fact_nodes = [NodeSpec("fact", d.text[:120], canonical(d.text[:120], {})) for d in facts_in]
        subjects = [NodeSpec("topic", t, canonical(t, self.aliases)) for t in topics]
        edges = []
        for node in entities + subjects + reading.self_nodes():
            named = sorted(reading.named_in.get(node.canonical, ())) or [
                i for i, f in enumerate(facts_in) if node.canonical in canonical(f.text, self.aliases)]
            for i in named or range(len(facts_in)):
                edges.append(EdgeSpec(node, fact_nodes[i], "describes", facts_in[i].confidence))
        edges += [EdgeSpec(a, b, "mentioned_in", min(da.confidence, db.confidence))
                  for (a, da), (b, db) in zip(zip(fact_nodes, facts_in), zip(fact_nodes[1:], facts_in[1:]))]
        mean = sum(d.confidence for d in facts_in) / len(facts_in) if facts_in else 0.5
        edges += [EdgeSpec(a, b, "co_occurs_with", mean) for a, b in combinations(entities + subjects, 2)]
        edges += reading.relation_edges()
        # Each entry puts its fact in the context of the whole memory: without the summary an
        # entry only repeats the document, and recall falls (docs/performance.md).
        # The stored text keeps its time marker: "when" questions lean on the graph route too.
        summary = document.fields.persona_summary or document.text[:SUMMARY_CHARS]
        entries = []
        for node, draft in zip(fact_nodes, facts_in):
            text = f"Fact: {draft.text} Summary: {summary}"
            entries.append(EntrySpec(text, " ".join(self.segmenter.terms(text)), node, draft.confidence,
                                     draft.atom_id))
        nodes = [*entities, *subjects, *reading.self_nodes(), *reading.relation_nodes(), *fact_nodes]
        return MemoryGraph(nodes=nodes, edges=edges, entries=entries)


class _Reading:
    """What the facts of one memory name: its entities, where each is named, its relations."""

    def __init__(self, builder: GraphBuilder, document: Document, speaker: str | None):
        self.builder = builder
        self.speaker = speaker
        self.known = _known_types(document, speaker)
        persona = document.fields.persona_id
        self.persona = canonical(persona, builder.aliases) if persona else None
        self.found: dict[str, NodeSpec] = {}
        self.named_in: dict[str, set[int]] = {}
        self.relations: list[tuple[int, Relation]] = []
        self.self_named: set[int] = set()
        for name, kind in self.known.items():
            self._take(Mention(name, kind, 0, len(name)), None)

    def read(self, index: int, text: str) -> None:
        mentions = self.builder.finder.mentions(text, self.known)
        for mention in mentions:
            self._take(mention, index)
        if self_spans(text):
            self.self_named.add(index)
        relations = find_relations(text, mentions, self.speaker)
        for relation in relations:
            for mention in (relation.subject, relation.object):
                if mention is not None:
                    self._take(mention, index, by_relation=True)
        self.relations += [(index, r) for r in relations]

    def _take(self, mention: Mention, index: int | None, by_relation: bool = False) -> None:
        """Note an entity where it is named. One node per name in a memory: what a relation
        says a name is (an employer is an organisation) wins over how the name looks."""
        node = self.node_of(mention)
        if node.canonical != SELF_CANONICAL:
            node = self.builder.node(mention)
        if node.canonical == SELF_CANONICAL:
            if index is not None:
                self.self_named.add(index)
            return
        seen = self.found.get(node.canonical)
        if seen is None or (by_relation and seen.type != node.type and node.type != PERSON):
            self.found[node.canonical] = node if seen is None else NodeSpec(node.type, seen.value, seen.canonical)
        if index is not None:
            self.named_in.setdefault(node.canonical, set()).add(index)

    def node_of(self, mention: Mention | None) -> NodeSpec:
        """An entity's node; the self is the speaker of a "Name: text" memory, else the user
        (also when the persona's own name is used)."""
        if mention is None:
            if self.speaker:
                return self.node_of(Mention(self.speaker, PERSON, 0, 0))
            return NodeSpec(PERSON, SELF_CANONICAL, SELF_CANONICAL)
        node = self.builder.node(mention)
        if self.persona and node.canonical == self.persona and mention.type == PERSON:
            return NodeSpec(PERSON, mention.name, SELF_CANONICAL)
        return self.found.get(node.canonical, node)

    def entities(self) -> list[NodeSpec]:
        return list(self.found.values())[:MAX_ENTITIES]

    def self_nodes(self) -> list[NodeSpec]:
        """The user's node, when the memory speaks of them (its facts are where)."""
        if self.speaker or not self.self_named:
            return []
        node = self.node_of(None)
        self.named_in[node.canonical] = self.self_named
        return [node]

    def relation_nodes(self) -> list[NodeSpec]:
        return [self.node_of(m) for _, r in self.relations for m in (r.subject, r.object)]

    def relation_edges(self) -> list[EdgeSpec]:
        """The relations' edges, each as sure as the rule that read it (the atom's confidence
        is about its type, not about who is whose sister)."""
        return [EdgeSpec(self.node_of(r.subject), self.node_of(r.object), "relation", r.confidence,
                         relation=r.relation)
                for _, r in self.relations if self.node_of(r.subject).key != self.node_of(r.object).key]


def _known_types(document: Document, speaker: str | None) -> dict[str, str]:
    """Names whose type is given: participants are people; a speaker is a person unless the
    memory's topics name another kind (an imported MCP memory entity: "Tokyo: ..." with the
    topic "city")."""
    known = {p: PERSON for p in document.fields.participants if p.strip()}
    if speaker:
        kinds = [IMPORTED_KINDS[t.strip().lower()] for t in document.fields.topics
                 if t.strip().lower() in IMPORTED_KINDS]
        known[speaker] = kinds[0] if kinds else PERSON
    return known


def _unique(items: list[str], key) -> list[str]:
    seen, out = set(), []
    for item in items:
        item = item.strip()
        k = key(item) if item else ""
        if k and k not in seen:
            seen.add(k)
            out.append(item)
    return out
