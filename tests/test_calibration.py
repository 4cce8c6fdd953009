"""Score calibration (shared/search/calibration.py): a logistic model of the query's strongest
evidence and a memory's place in the fusion, checked against numbers worked by hand."""

from __future__ import annotations

import math

import pytest

from shared.search.calibration import ABSOLUTE, Calibration, default, strongest

MODELS = {"models": [
    {"channels": ["bm25"], "intercept": -2.0, "weights": {"fused": 1.0, "place": -1.0, "bm25": 0.5}},
    {"channels": ["bm25", "vector"], "intercept": -3.0,
     "weights": {"fused": 1.0, "place": -1.0, "bm25": 0.5, "vector": 2.0}},
]}


def sigmoid(z):
    return 1 / (1 + math.exp(-z))


def test_hand_worked_probabilities_follow_the_fused_order():
    squashed = 1 / (1 + math.exp(-8 / 8))  # raw BM25 8 -> feature log(1 + 8)
    evidence = {1: {"bm25": squashed, "vector": 0.9}, 2: {"bm25": 0.5, "vector": 0.95}}
    p = Calibration.from_dict(MODELS).probabilities([(1, 1.0), (2, 0.4)], evidence)
    best = 0.5 * math.log(9) + 2.0 * 0.9  # strongest BM25 (memory 1) and cosine 0.9 (memory 2: 2*0.95-1)
    assert p[1] == pytest.approx(sigmoid(-3.0 + 1.0 + best))
    assert p[2] == pytest.approx(sigmoid(-3.0 + 0.4 - math.log(2) + best))
    assert p[1] > p[2]


def test_weak_evidence_everywhere_scores_low_whatever_the_ranks():
    weak = {1: {"bm25": 0.5, "vector": 0.5}}
    strong = {1: {"bm25": 1 / (1 + math.exp(-4)), "vector": 0.95}}
    calibration = Calibration.from_dict(MODELS)
    assert calibration.probabilities([(1, 1.0)], weak)[1] < calibration.probabilities([(1, 1.0)], strong)[1]


def test_a_channel_that_did_not_answer_falls_back_to_the_model_without_it():
    evidence = {1: {"bm25": 0.5, "graph_vector": 0.99}}  # no model knows graph_vector here
    p = Calibration.from_dict(MODELS).probabilities([(1, 1.0)], evidence)
    assert p[1] == pytest.approx(sigmoid(-2.0 + 1.0))
    assert strongest(evidence) == {"bm25": 0.0, "graph_vector": pytest.approx(ABSOLUTE["graph_vector"](0.99))}


def test_the_shipped_calibration_has_a_model_for_every_set_of_channels_with_bm25():
    models = default().models
    assert len(models) == 8 and all("bm25" in channels for channels in models)
