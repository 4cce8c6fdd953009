"""The held-out-fold yardstick (scripts/folds.py), with hand-worked numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import folds


def test_folds_split_locomo_by_conversation_madial_by_dialogue_number_mod_4_and_others_by_group():
    locomo = [{"id": f"conv-{g}:q{i}", "group": f"conv-{g}"} for g in (26, 30) for i in range(2)]
    assert folds.folds("locomo_dev", locomo) == {"conv-26": ["conv-26:q0", "conv-26:q1"],
                                                 "conv-30": ["conv-30:q0", "conv-30:q1"]}
    madial = [{"id": f"madial-zh:q{i}", "group": "user1"} for i in range(8)]
    assert folds.folds("madial_zh_dev", madial) == {
        "half-a": ["madial-zh:q0", "madial-zh:q1", "madial-zh:q4", "madial-zh:q5"],
        "half-b": ["madial-zh:q2", "madial-zh:q3", "madial-zh:q6", "madial-zh:q7"]}
    # Any other set (ours, e.g. deep_facts) folds by group, whatever its ids look like.
    deep = [{"id": f"q:{lang}-0{i}", "group": lang} for lang in ("zh", "en") for i in (1, 2)]
    assert folds.folds("deep_facts", deep) == {"en": ["q:en-01", "q:en-02"], "zh": ["q:zh-01", "q:zh-02"]}


def test_a_value_that_only_wins_where_it_is_scored_is_a_fit():
    fold_ids = {"a": ["1", "2"], "b": ["3", "4"]}
    # x is perfect on fold a only, y on fold b only: chosen on the other fold, each scores 0.
    fitted = {"x": {"1": 1, "2": 1, "3": 0, "4": 0}, "y": {"1": 0, "2": 0, "3": 1, "4": 1}}
    assert folds.held_out(fold_ids, fitted)["mean"] == 0.0
    # z is 0.5 everywhere; w is 0.75 on a and 0.25 on b. Fold b's value is chosen on a, where
    # w (0.75) beats z (0.5): w scores 0.25 on b. Fold a's is chosen on b, where z (0.5) beats
    # w (0.25): z scores 0.5 on a.
    mixed = {"z": dict.fromkeys("1234", 0.5), "w": {"1": 0.75, "2": 0.75, "3": 0.25, "4": 0.25}}
    outcome = folds.held_out(fold_ids, mixed)
    assert outcome["folds"] == {"a": ("z", 0.5), "b": ("w", 0.25)}
    assert outcome["mean"] == pytest.approx(0.375) and outcome["spread"] == pytest.approx(0.125)


def test_one_candidate_gives_its_per_fold_figures_and_ties_go_to_the_first():
    fold_ids = {"a": ["1"], "b": ["2"], "c": ["3"]}
    only = folds.held_out(fold_ids, {"default": {"1": 0.2, "2": 0.4, "3": 0.9}})
    assert [v for _, v in only["folds"].values()] == [0.2, 0.4, 0.9]
    assert (only["min"], only["max"]) == (0.2, 0.9)
    tie = folds.held_out(fold_ids, {"first": {"1": 1, "2": 1, "3": 1}, "second": {"1": 1, "2": 1, "3": 1}})
    assert {chosen for chosen, _ in tie["folds"].values()} == {"first"}


def test_pooled_choice_weighs_each_query_the_same_and_never_sees_the_scored_fold():
    # Dataset L (two folds of two queries) prefers x; dataset M (two folds of one) prefers y.
    big = ({"l1": ["1", "2"], "l2": ["3", "4"]},
           {"x": {"1": 0.6, "2": 0.6, "3": 0.6, "4": 0.6}, "y": {"1": 0.2, "2": 0.2, "3": 0.2, "4": 0.2}})
    small = ({"m1": ["a"], "m2": ["b"]},
             {"x": {"a": 0.1, "b": 0.1}, "y": {"a": 0.9, "b": 0.9}})
    outcome = folds.held_out_pooled({"L": big, "M": small})
    # Scoring L's fold l1: train = 3, 4, a, b: x (0.6 + 0.6 + 0.1 + 0.1) / 4 = 0.35,
    # y (0.2 + 0.2 + 0.9 + 0.9) / 4 = 0.55 -> y, which scores 0.2 on l1.
    assert outcome["L"]["folds"] == {"l1": ("y", 0.2), "l2": ("y", 0.2)}
    # Scoring m1: train = 1-4 and b: x (2.4 + 0.1) / 5 = 0.5, y (0.8 + 0.9) / 5 = 0.34 -> x.
    assert outcome["M"]["folds"] == {"m1": ("x", 0.1), "m2": ("x", 0.1)}
    assert outcome["M"]["mean"] == pytest.approx(0.1) and outcome["L"]["spread"] == 0.0
