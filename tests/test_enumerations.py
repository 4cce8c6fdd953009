"""Each enumeration is defined once; the tables keyed by one cover it exactly."""

from __future__ import annotations

import dataclasses
import re

from shared.config import FUSIONS, AtomsConfig
from shared.decay import ATOM_CURVES
from shared.search.fuse import SCORE_FUSIONS
from shared.store.model.atoms import ATOM_TYPES
from shared.store.model.stages import STATUSES
from shared.store.sqlite import schema
from shared.summarize.rules import _IMPORTANCE_BY_TYPE


def test_every_atom_type_has_a_curve_a_shelf_life_and_a_summary_weight():
    shelf_lives = {f.name.removeprefix("ttl_").removesuffix("_days")
                   for f in dataclasses.fields(AtomsConfig) if f.name.startswith("ttl_")}
    assert set(ATOM_CURVES) == set(ATOM_TYPES)
    assert shelf_lives == set(ATOM_TYPES)
    assert set(_IMPORTANCE_BY_TYPE) == set(ATOM_TYPES)


def test_every_fusion_a_config_allows_is_one_recall_can_run():
    assert set(SCORE_FUSIONS) | {"rrf"} == set(FUSIONS)


def test_the_stage_table_allows_exactly_the_stage_statuses():
    ddl = " ".join(statement for migration in schema.MIGRATIONS for statement in migration.statements)
    allowed = re.search(r"CHECK \(status IN \(([^)]*)\)\)", ddl).group(1)
    assert {word.strip(" '") for word in allowed.split(",")} == set(STATUSES)
