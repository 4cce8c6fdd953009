"""Score calibration (shared/search/calibration.py): a logistic model of the query's strongest
evidence per channel and a memory's place in the fusion, checked against numbers worked by
hand; and each channel's strength on a scale that does not depend on the store's size."""

from __future__ import annotations

import math

import pytest

from shared.assembly import open_services
from shared.config import AppConfig, StorageConfig, TextConfig
from shared.search.bm25 import Bm25Channel
from shared.search.calibration import Calibration, for_space, resource
from shared.search.query import Query
from shared.store.model.documents import DocumentFilter, MemoryFields
from shared.text.segment import Segmenter

MODELS = {"models": [
    {"channels": ["bm25"], "intercept": -2.0, "weights": {"fused": 1.0, "place": -1.0, "bm25": 0.5}},
    {"channels": ["bm25", "vector"], "intercept": -3.0,
     "weights": {"fused": 1.0, "place": -1.0, "bm25": 0.5, "vector": 2.0}},
], "answerable": [
    {"channels": ["bm25"], "intercept": -3.0, "weights": {"bm25": 4.0}},
    {"channels": ["bm25", "vector"], "intercept": -9.0, "weights": {"bm25": 4.0, "vector": 8.0}},
]}


def sigmoid(z):
    return 1 / (1 + math.exp(-z))


def test_hand_worked_probabilities_follow_the_fused_order():
    p = Calibration.from_dict(MODELS).probabilities([(1, 1.0), (2, 0.4)], {"bm25": 1.0, "vector": 0.8})
    best = 0.5 * 1.0 + 2.0 * 0.8
    assert p[1] == pytest.approx(sigmoid(-3.0 + 1.0 + best))
    assert p[2] == pytest.approx(sigmoid(-3.0 + 0.4 - math.log(2) + best))
    assert p[1] > p[2]


def test_weak_evidence_everywhere_scores_low_whatever_the_ranks():
    calibration = Calibration.from_dict(MODELS)
    weak = calibration.probabilities([(1, 1.0)], {"bm25": 0.0, "vector": 0.2})[1]
    strong = calibration.probabilities([(1, 1.0)], {"bm25": 1.0, "vector": 0.9})[1]
    assert weak < strong


def test_a_channel_that_did_not_answer_falls_back_to_the_model_without_it():
    p = Calibration.from_dict(MODELS).probabilities([(1, 1.0)], {"bm25": 0.0, "graph_vector": 0.99})
    assert p[1] == pytest.approx(sigmoid(-2.0 + 1.0))


def test_the_shipped_calibration_has_models_for_every_set_of_channels_in_every_space():
    spaces = resource()["spaces"]
    assert resource()["default_space"] in spaces
    for space in spaces:
        calibration = for_space(space)
        # every set of the four channels for candidates (none: the fusion alone, when no
        # channel's evidence can be read), every non-empty one for questions
        assert len(calibration.models) == 16 and len(calibration.answerable_models) == 15


def test_whether_a_question_is_answerable_reads_only_its_strongest_evidence():
    calibration = Calibration.from_dict(MODELS)
    assert calibration.answerable({"bm25": 1.0, "vector": 0.9}) == pytest.approx(sigmoid(-9.0 + 4.0 + 7.2))
    assert calibration.answerable({"bm25": 0.0, "vector": 0.8}) < calibration.answerable({"bm25": 1.0, "vector": 0.8})
    # a channel without a model of its own falls back to the model of the channels within
    assert calibration.answerable({"bm25": 0.5, "graph_keyword": 1.0}) == pytest.approx(sigmoid(-3.0 + 2.0))
    assert calibration.answerable({"graph_keyword": 1.0}) == 1.0  # no model: no evidence to refuse on


def test_an_embedder_never_fitted_refuses_no_question_on_its_cosines():
    fitted = for_space(resource()["default_space"])
    unknown = for_space("openai:some-model")
    weak = {"bm25": 0.0, "vector": 0.1, "graph_keyword": 0.0, "graph_vector": 0.1}
    assert fitted.answerable(weak) < 0.01
    assert unknown.answerable(weak) == 1.0
    # its candidates are scored by the default space's model of the other channels
    readable = {"bm25": 0.0, "graph_keyword": 0.0}
    assert unknown.probabilities([(1, 1.0)], weak) == fitted.probabilities([(1, 1.0)], readable)
    assert unknown.probabilities([(1, 1.0)], {"vector": 0.1})[1] > 0  # the fusion alone
    # without an embedder the default space's question model applies as it is
    assert for_space(None).answerable({"bm25": 0.0, "graph_keyword": 0.0}) < 0.1


def test_bm25_strength_is_the_share_of_the_query_a_memory_holds_at_any_store_size(tmp_path):
    services = open_services(AppConfig(storage=StorageConfig(data_dir=tmp_path / "data")), queued=False)
    service = services.memories
    segmenter = Segmenter(TextConfig())
    channel = Bm25Channel(services.store, 0.6)
    scope = DocumentFilter(persona_id="me")

    def strength(question):
        query = Query(question, segmenter, None)
        return channel.strength(query, channel.search(query, scope, 30))

    service.memorize("I have a peanut allergy.", MemoryFields(persona_id="me"))
    assert strength("peanut allergy") == 1.0  # one memory: raw BM25 would be ~0 here
    assert strength("peanut butter recipes") == pytest.approx(1 / 3)
    assert strength("quantum physics") == 0.0
    service.memorize_many([(f"Note {i} about gardening and tomatoes.", MemoryFields(persona_id="me"))
                           for i in range(200)])
    assert strength("peanut allergy") == 1.0
    services.close()


def test_a_word_form_counts_as_the_query_term():
    from shared.search.bm25 import holds

    assert holds({"peanuts", "found"}, "peanut") and holds({"allergic"}, "allergy")
    assert not holds({"president"}, "present") and not holds({"cats"}, "car")
