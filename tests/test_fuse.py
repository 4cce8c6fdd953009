"""RRF over (id, score) lists, checked against numbers worked by hand."""

from __future__ import annotations

import pytest

from shared.search.fuse import rrf


def test_rrf_hand_worked():
    bm25 = [(1, 9.0), (2, 5.0), (3, 1.0)]
    vector = [(3, 0.9), (1, 0.8), (4, 0.1)]
    fused = dict(rrf([bm25, vector], k=60))
    # id 1: 1/61 + 1/62; id 3: 1/63 + 1/61; id 2: 1/62; id 4: 1/63
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2] == pytest.approx(1 / 62)
    assert fused[4] == pytest.approx(1 / 63)
    assert [i for i, _ in rrf([bm25, vector], k=60)] == [1, 3, 2, 4]


def test_rrf_small_k_rewards_top_ranks_more():
    a = [(1, 0), (2, 0)]
    b = [(2, 0), (3, 0)]
    assert rrf([a, b], k=1) == [(2, pytest.approx(1 / 3 + 1 / 2)), (1, pytest.approx(1 / 2)),
                                (3, pytest.approx(1 / 3))]


def test_rrf_ties_keep_first_seen_order_and_empty_inputs():
    assert [i for i, _ in rrf([[(7, 1.0)], [(8, 1.0)]], k=60)] == [7, 8]
    assert rrf([], k=60) == []
    assert rrf([[], []], k=60) == []


from shared.config import RetrievalConfig  # noqa: E402
from shared.decay import atom_time_factor, recency  # noqa: E402
from shared.search.cache import RecallCache  # noqa: E402
from shared.search.fuse import fuse_routes, normalise  # noqa: E402
from shared.search.intent import has_cue, route_weights  # noqa: E402
from shared.search.mmr import mmr  # noqa: E402
from shared.text.overlap import jaccard  # noqa: E402


def test_normalise_divides_by_the_best():
    assert normalise([(1, 0.04), (2, 0.01)]) == [(1, 1.0), (2, 0.25)]
    assert normalise([]) == []


def test_fuse_routes_hand_worked():
    document = [(1, 0.8), (2, 0.4)]          # normalised: 1 -> 1.0, 2 -> 0.5
    graph = [(2, 0.3), (3, 0.15)]            # normalised: 2 -> 1.0, 3 -> 0.5
    fused = dict(fuse_routes(document, graph, 0.65, 0.35, 0.08))
    assert fused[1] == pytest.approx(0.65)
    assert fused[2] == pytest.approx(0.65 * 0.5 + 0.35 * 1.0 + 0.08)   # found by both
    assert fused[3] == pytest.approx(0.35 * 0.5)
    assert fuse_routes([(1, 1.0)], [(1, 1.0)], 0.65, 0.35, 0.08) == [(1, 1.0)]  # capped


def test_jaccard_and_mmr_hand_worked():
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3)
    assert jaccard([], []) == 0.0
    bags = {1: {"tea", "green"}, 2: {"tea", "green"}, 3: {"coffee"}}
    sim = lambda a, b: jaccard(bags[a], bags[b])  # noqa: E731
    # lambda 0.7: after picking 1, doc 2 scores 0.7*0.9 - 0.3*1.0 = 0.33, doc 3 0.7*0.5 = 0.35
    picked = mmr([(1, 1.0), (2, 0.9), (3, 0.5)], sim, 0.7, 3)
    assert [i for i, _ in picked] == [1, 3, 2]
    assert [v for _, v in picked] == pytest.approx([0.7, 0.35, 0.33])
    assert [i for i, _ in mmr([(1, 1.0), (2, 0.9), (3, 0.5)], sim, 1.0, 2)] == [1, 2]


def test_intent_routing():
    config = RetrievalConfig(document_route_weight=0.65, graph_route_weight=0.35,
                             relational_graph_boost=0.2, temporal_graph_boost=0.1)
    plain = route_weights("peanut allergy", config)
    assert (plain.document, plain.graph, plain.intents) == (pytest.approx(0.65), pytest.approx(0.35), ())
    who = route_weights("Who is Alice's colleague?", config)
    assert who.intents == ("relational",)
    assert who.graph == pytest.approx(0.55 / 1.2) and who.document == pytest.approx(0.65 / 1.2)
    zh = route_weights("Alice 和 Bob 是什么关系", config)
    assert set(zh.intents) == {"relational", "factual"}
    assert has_cue("When did we meet?", ["when"]) and not has_cue("whenever", ["when"])
    when = route_weights("上次体检是什么时候", config)
    assert when.intents == ("temporal",) and when.graph == pytest.approx(0.45 / 1.1)


def test_recency_and_atom_curves():
    assert recency(0, 30) == 1.0 and recency(30, 30) == pytest.approx(0.3679, abs=1e-4)
    assert recency(-5, 30) == 1.0
    assert atom_time_factor("episodic", 7, 7) == pytest.approx(0.3679, abs=1e-4)
    assert atom_time_factor("planned", 1, 2, days_to_deadline=0.5) == 1.0
    assert atom_time_factor("planned", 3, 2, days_to_deadline=-0.1) == 0.0
    assert atom_time_factor("relational", 45, 90) == pytest.approx(0.5)
    assert atom_time_factor("unknown", 40, 30) == 0.0
    assert atom_time_factor("factual", 100, None) == 1.0


def test_recall_cache_ttl_lru_and_epoch():
    now = [0.0]
    cache = RecallCache(ttl_s=45, size=2, clock=lambda: now[0])
    cache.put("a", 1, "A")
    assert cache.get("a", 1) == "A"
    assert cache.get("a", 2) is None            # a write happened: gone
    cache.put("a", 2, "A2")
    now[0] = 46
    assert cache.get("a", 2) is None            # too old
    cache.put("x", 2, "X")
    cache.put("y", 2, "Y")
    cache.get("x", 2)
    cache.put("z", 2, "Z")                      # evicts y, the least recently used
    assert cache.get("y", 2) is None and cache.get("x", 2) == "X" and len(cache) == 2


from shared.search.focus import focus  # noqa: E402
from shared.search.fuse import spread, standardised, weighted_minmax, weighted_zscore  # noqa: E402


def test_weighted_minmax_hand_worked():
    bm25 = [(1, 9.0), (2, 5.0), (3, 1.0)]        # scaled: 1.0, 0.5, 0.0
    vector = [(3, 0.9), (4, 0.7), (1, 0.5)]      # scaled: 1.0, 0.5, 0.0
    fused = dict(weighted_minmax([bm25, vector], [0.6, 0.4]))
    assert fused == {1: pytest.approx(0.6), 2: pytest.approx(0.3), 3: pytest.approx(0.4), 4: pytest.approx(0.2)}
    assert [i for i, _ in weighted_minmax([bm25, vector], [0.6, 0.4])] == [1, 3, 2, 4]
    assert spread([(7, 0.3)]) == [(7, 1.0)] and spread([]) == []


def test_focus_keeps_the_last_speakers_lines_of_a_transcript():
    dialogue = "Bart: 元旦晚会我要表演魔术！\nAssistant: 太棒了！\nBart: 我要穿什么好呢？"
    assert focus(dialogue) == "Bart: 元旦晚会我要表演魔术！\nBart: 我要穿什么好呢？"
    assert focus("Amy：I got a puppy\nAssistant：Lovely!\namy: he chews shoes") == \
        "Amy：I got a puppy\namy: he chews shoes"
    assert focus("When did Caroline go to the support group?") == "When did Caroline go to the support group?"
    mixed = "Note: buy milk\nand also eggs"  # not a transcript: unchanged
    assert focus(mixed) == mixed
    assert focus("Q: one line only") == "Q: one line only"


def test_standardised_hand_worked():
    # scores 4, 2, 0: mean 2, population stdev sqrt(8/3) = 1.63299; (s - 0) / 1.63299
    got = dict(standardised([(1, 4.0), (2, 2.0), (3, 0.0)]))
    assert got == pytest.approx({1: 2.44949, 2: 1.224745, 3: 0.0}, rel=1e-5)
    assert standardised([(7, 0.3)]) == [(7, 1.0)]
    assert standardised([(1, 0.5), (2, 0.5)]) == [(1, 1.0), (2, 1.0)]
    assert standardised([]) == []


def test_weighted_zscore_keeps_how_far_a_match_stands_out():
    # bm25: 10, 2, 0 -> mean 4, stdev sqrt(56/3) = 4.32049 -> 2.31455, 0.46291, 0
    # vector: 0.9, 0.8, 0.7 (ids 3, 2, 1) -> stdev 0.0816497 -> 2.44949, 1.224745, 0
    fused = dict(weighted_zscore([[(1, 10.0), (2, 2.0), (3, 0.0)], [(3, 0.9), (2, 0.8), (1, 0.7)]],
                                      [0.6, 0.4]))
    assert fused == pytest.approx({1: 0.6 * 2.31455, 2: 0.6 * 0.46291 + 0.4 * 1.224745,
                                   3: 0.4 * 2.44949}, rel=1e-5)
    assert [i for i, _ in weighted_zscore([[(1, 10.0), (2, 2.0), (3, 0.0)],
                                                [(3, 0.9), (2, 0.8), (1, 0.7)]], [0.6, 0.4])] == [1, 3, 2]


def test_a_memory_its_channel_has_not_indexed_gets_that_rankings_best():
    from shared.search.fuse import weighted_minmax, weighted_zscore

    bm25 = [(9, 0.9)]                      # a new memory: its BM25 row only
    vector = [(1, 0.9), (2, 0.8), (3, 0.7)]  # min-max: 1.0, 0.5, 0.0
    # Without knowing 9 has no vector yet, the vector channel's silence counts against it.
    assert weighted_minmax([bm25, vector], [0.6, 0.4])[0] == (9, pytest.approx(0.6))
    fused = dict(weighted_minmax([bm25, vector], [0.6, 0.4], [set(), {9}]))
    assert fused[9] == pytest.approx(0.6 * 1.0 + 0.4 * 1.0)
    assert fused[1] == pytest.approx(0.4 * 1.0)
    # zscore: vector standardised (0.9-0.7)/stdev; 9 takes that best, plus BM25's 1.0
    deviation = (((0.1) ** 2 + 0 + (0.1) ** 2) / 3) ** 0.5
    z = dict(weighted_zscore([bm25, vector], [0.6, 0.4], [set(), {9}]))
    assert z[9] == pytest.approx(0.6 + 0.4 * 0.2 / deviation)
    assert z[1] == pytest.approx(0.4 * 0.2 / deviation)
    # An id no ranking of the route holds is not added by being pending.
    assert 5 not in dict(weighted_zscore([bm25, vector], [0.6, 0.4], [set(), {5}]))


def test_a_memory_the_graph_has_not_taken_in_counts_as_found_by_both_routes():
    from shared.search.fuse import fuse_routes

    document = [(1, 2.0), (2, 1.0)]
    graph = [(1, 1.0)]
    plain = dict(fuse_routes(document, graph, 0.6, 0.4, 0.1))
    assert plain[2] == pytest.approx(0.6 * 0.5)
    pending = dict(fuse_routes(document, graph, 0.6, 0.4, 0.1, graph_pending={2}))
    assert pending[2] == pytest.approx(0.6 * 0.5 + 0.4 * 0.5 + 0.1)
    assert pending[1] == plain[1] == pytest.approx(1.0)
