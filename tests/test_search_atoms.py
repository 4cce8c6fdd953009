"""search_atoms without a query: a typed request lists the still-valid atoms of those types.

The first tests store atoms through the real rules layer in a temporary SQLite store and search
them with AtomSearch at a fixed clock; the last one goes from memorize through the worker's stages to
search_atoms over the official MCP client, as a new user asking for their plans would.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import front_in_process, run_every_stage, write_config
from shared.assembly import open_services
from shared.atom_life import store_atoms
from shared.config import AppConfig, StorageConfig, TextConfig
from shared.search.atom_search import AtomSearch
from shared.store.model.atoms import AtomOwner, AtomRow
from shared.store.model.documents import MemoryFields
from shared.text.segment import Segmenter

DAY = 86_400.0
NOW = 1_750_000_000.0  # the searches' clock


@pytest.fixture(scope="module")
def segmenter():
    return Segmenter(TextConfig())


@pytest.fixture
def seeded(tmp_path, segmenter):
    services = open_services(AppConfig(storage=StorageConfig(data_dir=tmp_path)), queued=False)
    service, store = services.memories, services.store

    def add(text: str, kind: str, persona: str = "u1", deadline_in_days: float | None = None,
            age_days: float = 0.0, ttl_days: float = 30.0) -> int:
        """One memory holding one atom, stored age_days before NOW."""
        doc = service.memorize(text, MemoryFields(persona_id=persona))
        owner = AtomOwner(doc.id, persona, None, 0.5, doc.content_hash)
        deadline = None if deadline_in_days is None else NOW + deadline_in_days * DAY
        row = AtomRow(kind, text, " ".join(segmenter.terms(text)), 0.8, deadline=deadline,
                            ttl_days=ttl_days)
        with store.write() as tx:
            store_atoms(tx, owner, [row], lambda *a: ttl_days, 0.99, NOW - age_days * DAY)
        return store.atoms.of_memory(doc.id)[0]["id"]

    yield store, add
    services.close()


def ids(hits) -> list[int]:
    return [h.row["id"] for h in hits]


def test_plans_listed_soonest_deadline_first_without_a_query(seeded, segmenter):
    store, add = seeded
    later = add("I will visit my grandmother in Hangzhou", "planned", deadline_in_days=20)
    soon = add("我明天要去医院复查", "planned", deadline_in_days=1)
    middle = add("Dentist appointment next Friday", "planned", deadline_in_days=9)
    undated = add("我打算学游泳", "planned", age_days=0.5, ttl_days=2)
    add("Past plan whose deadline went by", "planned", deadline_in_days=-1)  # not swept yet
    add("An undated plan past its shelf life", "planned", age_days=5, ttl_days=2)
    add("我喜欢爬山", "preference")
    add("Another user's plan for tomorrow", "planned", persona="u2", deadline_in_days=1)
    search = AtomSearch(store, segmenter, clock=lambda: NOW)
    hits = search.search(None, 10, ["planned"], "u1")
    assert ids(hits) == [soon, middle, later, undated]
    assert all(h.score == 0.0 and h.time_factor == 1.0 for h in hits)
    assert ids(search.search(None, 2, ["planned"], "u1")) == [soon, middle]


def test_other_types_are_listed_newest_first(seeded, segmenter):
    store, add = seeded
    old = add("I like green tea", "preference", age_days=3)
    new = add("我喜欢爬山", "preference", age_days=1)
    plan = add("我明天要去医院复查", "planned", deadline_in_days=1)
    search = AtomSearch(store, segmenter, clock=lambda: NOW)
    assert ids(search.search(None, 5, ["preference"], "u1")) == [new, old]
    assert ids(search.search(None, 5, ["preference", "planned"], "u1")) == [plan, new, old]


def test_a_query_that_names_no_plan_still_lists_the_plans(seeded, segmenter):
    """'plans' / '计划' match no plan's words; with types=[planned] the caller gets its plans."""
    store, add = seeded
    trip = add("Dentist appointment next Friday", "planned", deadline_in_days=9)
    checkup = add("我明天要去医院复查", "planned", deadline_in_days=1)
    add("I like green tea", "preference")
    search = AtomSearch(store, segmenter, clock=lambda: NOW)
    for query in ("plans", "计划", "my upcoming plans", "我的计划"):
        assert ids(search.search(query, 5, ["planned"], "u1")) == [checkup, trip], query
    # Without types a query that matches nothing finds nothing: no guessing what was meant.
    assert search.search("计划", 5, None, "u1") == []


def test_matching_atoms_come_first_and_the_rest_fill_up_to_k(seeded, segmenter):
    store, add = seeded
    checkup = add("我明天要去医院复查", "planned", deadline_in_days=1)
    dentist = add("Dentist appointment next Friday", "planned", deadline_in_days=9)
    trip = add("I will visit my grandmother in Hangzhou", "planned", deadline_in_days=20)
    search = AtomSearch(store, segmenter, clock=lambda: NOW)
    hits = search.search("dentist", 3, ["planned"], "u1")
    assert ids(hits) == [dentist, checkup, trip]
    assert hits[0].score > 0 and hits[1].score == hits[2].score == 0.0
    assert ids(search.search("dentist", 1, ["planned"], "u1")) == [dentist]


def system_config(tmp_path, api):
    return write_config(
        tmp_path, embedding={"provider": "openai", "base_url": api.base_url, "model": "fake", "dimensions": 32},
        queue={"retry_base_s": 0.2}, server={"exposed_tools": ["memorize", "search_atoms"]})


@pytest.mark.slow
def test_a_new_user_asking_for_plans_gets_them_through_mcp(tmp_path):
    said = datetime.now(timezone.utc).replace(second=0, microsecond=0, tzinfo=None)
    memories = [("我这个周末要去爬山", said), ("明天要去医院复查", said),
                ("I have a dentist appointment in three weeks", said),
                ("I love hiking in the mountains", said),
                ("I will fly to Tokyo tomorrow", said - timedelta(days=400))]  # long past
    with FakeEmbeddingsServer(dim=32) as api:
        config = system_config(tmp_path, api)
        with front_in_process(config) as s:
            for text, when in memories:
                s.ok("memorize", {"content": text, "metadata": {
                    "persona_id": "new-user", "original_time": when.isoformat()}})
            run_every_stage(config)
            listed = s.ok("search_atoms", {"types": ["planned"], "persona_id": "new-user"})["atoms"]
            for query in ("plans", "计划"):
                asked = s.ok("search_atoms", {"query": query, "types": ["planned"],
                                              "persona_id": "new-user"})["atoms"]
                assert [a["id"] for a in asked] == [a["id"] for a in listed], query
            message = s.error("search_atoms", {"persona_id": "new-user"})
            assert s.error("search_atoms", {"query": "  "}) == message
    texts = [a["text"] for a in listed]
    # Tomorrow, then this weekend's Sunday (the same day when said on a Saturday), then three
    # weeks on; the Tokyo flight's deadline passed long ago.
    assert set(texts[:2]) == {"明天要去医院复查", "我这个周末要去爬山"}
    assert texts[2:] == ["I have a dentist appointment in three weeks"]
    sunday = said + timedelta(days=6 - said.weekday())
    weekend = next(a for a in listed if a["text"] == "我这个周末要去爬山")
    assert weekend["deadline"] == sunday.replace(hour=23, minute=59, second=59).replace(
        tzinfo=timezone.utc).isoformat()
    assert all(a["type"] == "planned" and a["deadline"] for a in listed)
    assert message == 'give a query, or types to list (e.g. types=["planned"] for upcoming plans)'
