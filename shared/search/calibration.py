"""Scores with a meaning: how likely a memory is relevant to a query.

Two things decide it. How strong the query's best evidence is in each channel, on a scale that
does not depend on the other candidates or the store's size (Channel.strength): the largest
share of the query's terms one memory holds, the best cosine (against what this embedder gives
unrelated text), the best graph weight. A question about something the persona never said
finds only weak evidence in every channel, however the candidates rank among themselves. And where the memory stands among the candidates: the
routes' fused score (relative to the best) and its place in that order. Both go into a logistic
model:

    p = 1 / (1 + exp(-(intercept + w_f * fused + w_r * log(1 + place)
                       + sum over channels of w_c * strongest_c)))

The first part is the same for every candidate of a query, so ranking by p is ranking by the
fusion (whose held-out quality it keeps), while p itself is comparable across queries, personas
and store sizes. There is one model per set of channels that answered the query (an embedder
that is down leaves the vector channels out). Every model is fitted by scripts/calibrate.py on
the dev benchmarks' folds: a question's annotated evidence memories are positives, every other
candidate of it negatives, and so is every candidate of a question asked in another
conversation's persona. The fitted numbers live in shared/resources/score_calibration.json.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Mapping, Sequence

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
    """{the channels that answered a query: its model}."""

    models: Mapping[frozenset, Model]

    def probabilities(self, ranked: Sequence[tuple[int, float]],
                      best: Mapping[str, float]) -> dict[int, float]:
        """{id: P(relevant)} for a fused ranking (best first, scores relative to the best)
        given the query's strongest evidence in each channel that answered (Channel.strength)."""
        model = self._model_for(frozenset(best))
        if model is None:
            return {doc_id: 0.0 for doc_id, _ in ranked}
        return {doc_id: _sigmoid(model.logit(inputs(fused, place, best)))
                for place, (doc_id, fused) in enumerate(ranked)}

    def _model_for(self, channels: frozenset) -> Model | None:
        """The model of exactly these channels, else of the largest set within them."""
        model = self.models.get(channels)
        if model is not None:
            return model
        within = [s for s in self.models if s <= channels]
        return self.models[max(within, key=len)] if within else None

    @staticmethod
    def from_dict(raw: Mapping) -> Calibration:
        return Calibration({frozenset(m["channels"]): Model(m["intercept"], dict(m["weights"]))
                            for m in raw["models"]})


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))


@lru_cache(maxsize=1)
def default() -> Calibration:
    """The calibration fitted on the dev benchmarks (shared/resources/score_calibration.json)."""
    text = resources.files("shared.resources").joinpath(RESOURCE).read_text(encoding="utf-8")
    return Calibration.from_dict(json.loads(text))
