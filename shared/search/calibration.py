"""Scores with a meaning: how likely a memory is relevant to a query, from each channel's own
evidence about it.

A channel's score is on its own absolute scale (BM25's squashed raw score, a cosine), not a
rank among today's candidates, so the same evidence gives the same probability whatever else
the store holds. A logistic model turns the evidence into a probability:

    p = 1 / (1 + exp(-(intercept + sum over channels of weight * feature(score))))

with one model per set of channels that have indexed the memory: a memory saved a moment ago
has its BM25 row but no vector or graph entries yet, and is scored by the model fitted without
those channels, so their silence is no evidence against it (read-your-writes). Every model is
fitted by scripts/calibrate.py on the dev benchmarks' folds: a question's annotated evidence
memories are positives, every other candidate of it negatives, and so is every candidate of a
question asked in another conversation's persona. The fitted numbers live in
shared/resources/score_calibration.json.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Callable, Mapping

RESOURCE = "score_calibration.json"


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


# A channel's score in [0, 1] turned into the model's input: BM25's squash undone (raw =
# 8 * logit) and log-scaled, since relevance grows with a rare term's weight but saturates;
# cosines back on [-1, 1]; graph keyword weights as they are.
ABSOLUTE: dict[str, Callable[[float], float]] = {
    "bm25": lambda s: math.log1p(max(0.0, 8.0 * _logit(s))),
    "vector": lambda s: 2.0 * s - 1.0,
    "graph_keyword": lambda s: s,
    "graph_vector": lambda s: 2.0 * s - 1.0,
}

Spread = tuple[float, float]  # (mean, standard deviation) of a channel's ranking's scores


def spread_of(scores: list[float]) -> Spread:
    if not scores:
        return 0.0, 0.0
    mean = sum(scores) / len(scores)
    return mean, (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5


def inputs(evidence: Mapping[str, float], spreads: Mapping[str, Spread], fused: float) -> dict[str, float]:
    """The model's inputs for one memory: per channel with evidence, its absolute score
    (`bm25`) and how far it stands above the channel's candidates for this query, in their
    standard deviations (`bm25_z`, 0 when they do not spread: a cosine of 0.84 means little
    when every memory scores 0.83); and `fusion`, its routes' fused score (relative to the
    best candidate's)."""
    out = {"fusion": fused}
    for channel, score in evidence.items():
        if channel not in ABSOLUTE:
            continue
        out[channel] = ABSOLUTE[channel](score)
        mean, deviation = spreads.get(channel, (0.0, 0.0))
        out[f"{channel}_z"] = (score - mean) / deviation if deviation > 1e-9 else 0.0
    return out


@dataclass(frozen=True)
class Model:
    intercept: float
    weights: Mapping[str, float]

    def logit(self, values: Mapping[str, float]) -> float:
        return self.intercept + sum(w * values.get(name, 0.0) for name, w in self.weights.items())


@dataclass(frozen=True)
class Calibration:
    """{the channels a memory has evidence from: its model}."""

    models: Mapping[frozenset, Model]

    def probability(self, evidence: Mapping[str, float], spreads: Mapping[str, Spread],
                    fused: float) -> float:
        """P(relevant) from the evidence of the channels that have indexed the memory (a
        channel the calibration does not know, or one that failed, is left out)."""
        model = self._model_for(frozenset(c for c in evidence if c in ABSOLUTE))
        if model is None:
            return 0.0
        z = model.logit(inputs(evidence, spreads, fused))
        return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))

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


@lru_cache(maxsize=1)
def default() -> Calibration:
    """The calibration fitted on the dev benchmarks (shared/resources/score_calibration.json)."""
    text = resources.files("shared.resources").joinpath(RESOURCE).read_text(encoding="utf-8")
    return Calibration.from_dict(json.loads(text))
