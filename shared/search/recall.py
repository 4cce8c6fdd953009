"""Recall: runs a request's channels concurrently (shared/search/channel.py) and gathers the
candidates: what they found, what the question's relations lead to, and what happens inside
the time window it names or the caller gives; notes whether it asks about people no memory
mentions (shared/search/mentions.py). A Fusion (shared/search/fusion.py: the dual-route hybrid
retrieval) scores them. Answers are cached per write epoch. Every weight comes from
RetrievalConfig; shared/assembly.py rebuilds the Recaller when those settings change.

RecallRequest, floors and Hit live in shared/search/request.py and are importable from here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import cast

import numpy as np

# atom_life takes its rows as a bare Sequence (that module is not strict yet).
from shared.atom_life import replaced_memories, temporal_factors  # pyright: ignore[reportUnknownVariableType]
from shared.config import RetrievalConfig
from shared.errors import AokunError
from shared.search import answer, calibration, happening, mentions, timeframe
from shared.search.atom_search import holding_types
from shared.search.cache import RecallCache
from shared.search.channel import NOTES, Channel, Notes
from shared.search.focus import focus
from shared.search.fusion import Found, Fusion
from shared.search.graph import GraphKeywordChannel
from shared.search.intent import wanted_atom_types
from shared.search.query import Query
from shared.search.request import Hit, RecallRequest, floors
from shared.store.interface import Store
from shared.store.model.documents import DocumentFilter
from shared.text.segment import Segmenter

__all__ = ["Hit", "RecallRequest", "Recaller", "floors"]

log = logging.getLogger("aokun.recall")

# A channel and what its search gave: its ranking, or the error it raised.
Outcome = tuple[Channel, list[tuple[int, float]] | AokunError]


class Recaller:
    """Runs the channels concurrently and fuses them; caches answers per write epoch."""

    def __init__(self, store: Store, segmenter: Segmenter, channels: Sequence[Channel],
                 embed: Callable[[str], np.ndarray] | None, config: RetrievalConfig,
                 executor: ThreadPoolExecutor | None = None, clock: Callable[[], float] = time.time,
                 space: str | None = None):
        self.store = store
        self.segmenter = segmenter
        self.channels = list(channels)
        self.embed = embed
        self.config = config
        self.executor = executor or ThreadPoolExecutor(max_workers=3, thread_name_prefix="recall")
        self.clock = clock
        self.cache = RecallCache(config.cache_ttl_s, config.cache_size) if config.cache_enabled else None
        self.scoring = calibration.for_space(space)  # space: the embedding model of the vectors

    def recall(self, request: RecallRequest) -> list[Hit]:
        """The best hits scoring at least request.min_score, at most k, duplicates folded,
        fitted to request.max_chars; nothing when nothing scores high enough."""
        if self.cache is None:
            return self._recall(request)
        epoch = self.store.meta.recall_epoch()
        key = request
        hits = self.cache.get(key, epoch)
        if hits is None:
            hits = self._recall(request)
            self.cache.put(key, epoch, hits)
        return hits

    # -- channels -------------------------------------------------------------------------

    def _recall(self, request: RecallRequest) -> list[Hit]:
        fusion = self.candidates(request)
        if fusion is None:
            return []
        return answer.fit(fusion.hits(self.store.documents.terms_of), request.max_chars)

    def candidates(self, request: RecallRequest) -> Fusion | None:
        """Every candidate the channels found, with the channels that have not taken it in yet
        (what recall scores, and what scripts/calibrate.py fits the scores on); None if none."""
        if self.config.query_focus:
            request = replace(request, query=focus(request.query))
        query = Query(request.query, self.segmenter, self.embed)
        now = self.clock()
        asked = self._time_question(request, now)
        found = self._run_channels(query, request.scope, max(self.config.candidate_depth, request.k))
        related = self._related(found, query, request.scope)
        listed = self._listed(asked, request.scope, now)
        candidates = sorted({i for r in found.rankings.values() for i, _ in r} | set(related) | set(listed))
        documents = self.store.documents.get_many(candidates)
        if not documents:
            return None
        strongest = _strongest(found, query)
        validity = self.store.atoms.validity_rows(list(documents))
        wanted = wanted_atom_types(request.query, self.config) if self.config.atom_type_boost > 0 else ()
        typed = holding_types(validity, wanted, now) if wanted else set[int]()
        fusion = Fusion(self.config, documents, found, temporal_factors(validity, now),
                         self.store.graph.memory_confidence(list(documents)), now, request,
                         self._pending(found, list(documents)), strongest, self.scoring, typed, related,
                         replaced_memories(validity))
        fusion.none_mentioned = partial(self._none_mentioned, request)
        if asked is not None:
            fusion.asked, fusion.listed = asked, [i for i in listed if i in documents]
            fusion.within = happening.inside(asked, documents, validity, request.zone)
        return fusion

    def _none_mentioned(self, request: RecallRequest) -> bool:
        """Whether the question asks about people none of whom any memory in scope mentions
        (shared/search/mentions.py); a word that is no index term (a question word) is no one."""
        people = [terms for words in mentions.asked_people(request.query)
                  if (terms := {t for w in words for t in self.segmenter.unique_terms(w, 8)})]
        return mentions.none_mentioned(
            people, lambda terms: bool(self.store.documents.bm25(sorted(terms), request.scope, 1, 1.0)))

    def _time_question(self, request: RecallRequest, now: float) -> timeframe.TimeQuestion | None:
        """The window on when things happen: the caller's, else the one the query names."""
        terms_of = self.segmenter.unique_terms
        if request.happens_after is not None or request.happens_before is not None:
            return timeframe.explicit(request.happens_after, request.happens_before, request.query, terms_of, now,
                                      request.zone)
        return timeframe.read(request.query, terms_of, now, self.config.plan_cues, request.zone)

    def _listed(self, asked: timeframe.TimeQuestion | None, scope: DocumentFilter, now: float) -> list[int]:
        """For an agenda question or the caller's window, what happens inside it whether or not
        a channel found it: its dated plans soonest first, and, for a window that reaches
        before now, the memories told in it."""
        if asked is None or not (asked.agenda or asked.explicit):
            return []
        window, depth = asked.window, self.config.candidate_depth
        ids = [row["memory_id"] for row in self.store.atoms.plans_due_between(
            window.start, window.end, scope.persona_id, scope.session_id, depth)]
        if window.start is None or window.start < now:
            told = replace(scope, since=_bound(max, scope.since, window.start),
                           until=_bound(min, scope.until, window.end))
            ids += [d.id for d in self.store.documents.list(depth, 0, told)[0]]
        return sorted(self.store.documents.filter_ids(ids, scope), key=ids.index)

    def _related(self, found: Found, query: Query, scope: DocumentFilter) -> dict[int, float]:
        """{memory: weight} about the entities the question's relations lead to, as the graph
        keyword channel resolves them (none when it is off)."""
        channel = found.channels.get("graph_keyword")
        if channel is None or self.config.relation_boost <= 0:
            return {}
        # Only the graph keyword channel answers relations (channels.BUILDERS builds it).
        return cast(GraphKeywordChannel, channel).relation_memories(query, scope)

    def _pending(self, found: Found, ids: list[int]) -> dict[str, set[int]]:
        """{channel: the candidates it has not taken in yet}. A channel that cannot say counts
        as having taken in all of them (the rankings alone then decide)."""
        pending: dict[str, set[int]] = {}
        for name, channel in found.channels.items():
            try:
                pending[name] = set(ids) - channel.indexed(ids)
            except AokunError as exc:
                log.warning("%s channel could not say which memories it has indexed: %s", name, exc)
                pending[name] = set()
        return pending

    def _run_channels(self, query: Query, scope: DocumentFilter, depth: int) -> Found:
        """The query embedding and the channels that need it in a pool thread; each SQLite
        channel in a lane of its own (SQLite and the embedder release the GIL), the last in
        this thread: at 100k memories with context, BM25 and graph keyword one after the other
        outlasted the embedding lane (docs/performance.md, Recall speed).
        Outcomes keep the configured channel order, so fusion ties break the same way."""
        vector_channels = [c for c in self.channels if c.needs_vector]
        sqlite_channels = [c for c in self.channels if not c.needs_vector]
        lanes = [self.executor.submit(self._run, vector_channels, query, scope, depth)] \
            if vector_channels else []
        lanes += [self.executor.submit(self._run, [c], query, scope, depth) for c in sqlite_channels[:-1]]
        outcomes = self._run(sqlite_channels[-1:], query, scope, depth)
        for lane in lanes:
            outcomes += lane.result()
        order = {channel.name: i for i, channel in enumerate(self.channels)}
        outcomes.sort(key=lambda outcome: order[outcome[0].name])
        found = Found()
        for channel, outcome in outcomes:
            if isinstance(outcome, AokunError):
                if not self.config.fallback_enabled:
                    raise outcome
                log.warning("%s channel failed, the others serve: %s", channel.name, outcome)
                continue
            found.rankings[channel.name] = outcome
            found.channels[channel.name] = channel
        found.notes = query.derived(NOTES, Notes)
        return found

    def _run(self, channels: Sequence[Channel], query: Query, scope: DocumentFilter, depth: int) -> list[Outcome]:
        """(channel, ranking or the AokunError it raised) for each channel, in order; each
        channel's reads share one snapshot (store.reading: on a database server one
        transaction instead of dozens)."""
        outcomes: list[Outcome] = []
        for channel in channels:
            try:
                with self.store.reading():
                    outcomes.append((channel, channel.search(query, scope, depth)))
            except AokunError as exc:
                outcomes.append((channel, exc))
        return outcomes


def _strongest(found: Found, query: Query) -> dict[str, float]:
    """Per channel that answered and can say: how strong its best evidence is."""
    strengths = {name: found.channels[name].strength(query, ranking) for name, ranking in found.rankings.items()}
    return {name: value for name, value in strengths.items() if value is not None}


def _bound(pick: Callable[[list[float]], float], *bounds: float | None) -> float | None:
    """The tighter of two optional bounds (pick: max for a start, min for an end)."""
    given = [b for b in bounds if b is not None]
    return pick(given) if given else None

