"""Scores with a meaning: how likely a memory is relevant to a query.

Two things decide it. How strong the query's best evidence is in each channel, on a scale that
does not depend on the other candidates or the store's size (Channel.strength): the largest
share of the query's terms one memory holds, the best cosine (against what this embedder gives
unrelated text), the best graph weight. A question about something the persona never said
finds only weak evidence in every channel, however the candidates rank among themselves. And
where the memory stands among the candidates: the routes' fused score (relative to the best) and
its place in that order. Both go into a logistic model:

    p = 1 / (1 + exp(-(intercept + w_f * fused + w_r * log(1 + place)
                       + sum over channels of w_c * strongest_c)))

The first part is the same for every candidate of a query, so ranking by p is ranking by the
fusion (whose held-out quality it keeps), while p itself is comparable across queries, personas
and store sizes. There is one model per set of channels that answered the query (an embedder
that is down leaves the vector channels out). Every model is fitted by scripts/calibrate.py on
the dev benchmarks' folds: a question's annotated evidence memories are positives, every other
candidate of it negatives, and so is every candidate of a question asked in another
conversation's persona. The fitted numbers live in shared/resources/score_calibration.json.

A second model, per set of channels too, says how likely the store holds an answer to the
question at all, from the strongest evidence alone:

    P(answerable) = 1 / (1 + exp(-(intercept + sum over channels of w_c * strongest_c)))

It is fitted on questions, not candidates: a question asked in its own conversation's persona
(with annotated evidence) is answerable; the same question asked in another persona, and an
everyday question about something the person never said, is not. Ranking candidates is one
decision and whether to answer at all is another: a candidate-level model learns mostly where
relevant memories stand among the candidates, which is the same for a question with no answer.

A cosine is on its embedder's own scale (e5 gives unrelated sentences 0.8, USE 0.1), so the
models are fitted per embedding model (the resource's "spaces"). A model that has none (an
API model) is scored with the default space's models without the vector channels' evidence
(the model of the other channels, or of the fusion alone), and no question is refused while
its vector channels answered: a floor on cosines of an unknown scale could refuse them all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any

RESOURCE = "score_calibration.json"


def inputs(fused: float, place: int, strongest: Mapping[str, float]) -> dict[str, float]:
    """The model's inputs for one candidate: its fused score (0-1, the best is 1), its place in
    the fused order (0 first), and per channel the query's strongest absolute evidence."""
    return {"fused": fused, "place": math.log1p(place), **strongest}


@dataclass(frozen=True)
class Model:
    intercept: float
    weights: Mapping[str, float]

    def logit(self, values: Mapping[str, float]) -> float:
        return self.intercept + sum(w * values.get(name, 0.0) for name, w in self.weights.items())


@dataclass(frozen=True)
class Calibration:
    """{the channels that answered a query: its model}, for candidates and for questions."""

    models: Mapping[frozenset[str], Model]
    answerable_models: Mapping[frozenset[str], Model] = field(default_factory=dict[frozenset[str], Model])
    unreadable: frozenset[str] = frozenset()  # channels whose strength is on an unknown scale

    def probabilities(self, ranked: Sequence[tuple[int, float]],
                      best: Mapping[str, float]) -> dict[int, float]:
        """{id: P(relevant)} for a fused ranking (best first, scores relative to the best)
        given the query's strongest evidence in each channel that answered (Channel.strength)."""
        best = {name: value for name, value in best.items() if name not in self.unreadable}
        model = self._model_for(frozenset(best))
        if model is None:
            return {doc_id: 0.0 for doc_id, _ in ranked}
        return {doc_id: _sigmoid(model.logit(inputs(fused, place, best)))
                for place, (doc_id, fused) in enumerate(ranked)}

    def answerable(self, best: Mapping[str, float]) -> float:
        """P(the store holds an answer to the query) given its strongest evidence in each
        channel that answered; 1.0 where no model covers those channels (no evidence to say no)."""
        model = _model_for(self.answerable_models, frozenset(best))
        if model is None or self.unreadable & best.keys():
            return 1.0
        return _sigmoid(model.logit(best))

    def _model_for(self, channels: frozenset[str]) -> Model | None:
        return _model_for(self.models, channels)

    @staticmethod
    def from_dict(raw: Mapping[str, Any]) -> Calibration:
        return Calibration(_models(raw["models"]), _models(raw.get("answerable", [])))


def _models(rows: Iterable[Mapping[str, Any]]) -> dict[frozenset[str], Model]:
    return {frozenset(m["channels"]): Model(m["intercept"], dict(m["weights"])) for m in rows}


def _model_for(models: Mapping[frozenset[str], Model], channels: frozenset[str]) -> Model | None:
    """The model of exactly these channels, else of the largest set within them."""
    model = models.get(channels)
    if model is not None:
        return model
    within = [s for s in models if s <= channels]
    return models[max(within, key=len)] if within else None


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))


def resource() -> dict[str, Any]:
    """shared/resources/score_calibration.json: {"spaces": {embedding model: its models},
    "default_space", "embedder_channels"} (written by scripts/calibrate.py)."""
    return json.loads(resources.files("shared.resources").joinpath(RESOURCE).read_text(encoding="utf-8"))


@lru_cache(maxsize=8)
def for_space(model: str | None) -> Calibration:
    """The calibration fitted with this embedding model's vectors; without an embedder, the
    default space's (the vector channels never answer then); for a model that was never
    fitted, the default space's without reading the vector channels' evidence."""
    raw = resource()
    fitted = raw["spaces"].get(model) if model is not None else None
    if fitted is not None:
        return Calibration.from_dict(fitted)
    default = Calibration.from_dict(raw["spaces"][raw["default_space"]])
    if model is None:
        return default
    return replace(default, unreadable=frozenset(raw["embedder_channels"]))
