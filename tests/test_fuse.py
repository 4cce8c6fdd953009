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
