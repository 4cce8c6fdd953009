"""Read-your-writes: a memory is found by its words the moment memorize returns, whatever the
state of its vectors and graph. A channel that has not indexed a memory yet is no evidence
against it (shared/search/calibration.py).

The grown store is seeded the way scripts/bench_recall_speed.py seeds one: 2,000 everyday
memories with their BM25 rows, real e5 vectors (one per sentence pattern: embedding every
memory would take minutes on two cores), graph nodes and entries, and every stage done. The
new memories go through the official MCP client to the real front, built in this process.
"""

from __future__ import annotations

import itertools

import pytest

from helpers import db_rows, front_in_process, store_sql, write_config
from shared.assembly import open_services
from shared.config import AppConfig, EmbeddingConfig, StorageConfig
from shared.embedders import build_embedder
from shared.store.model.documents import MemoryFields
from shared.store.model.graph import EdgeSpec, EntrySpec, MemoryGraph, NodeSpec
from shared.store.model.vectors import VectorRow

PATTERNS = [
    "{name} and I talked about the rent for the new flat in {place}.",
    "The landlord in {place} finally fixed the heater, {name} said.",
    "{name} paid forty euros for concert tickets in {place}.",
    "I went hiking near {place} with {name} last weekend.",
    "{name} recommended a dentist in {place}.",
    "We had dinner at a noodle place in {place} with {name}.",
    "{name} is learning to play the piano.",
    "My neighbour {name} adopted a cat from the shelter in {place}.",
    "{name} started a new job at a bank in {place}.",
    "I booked train tickets to {place} to visit {name}.",
    "{name}和我在{place}喝了咖啡。",
    "我和{name}周末去{place}爬山了。",
    "{name}最近在{place}学做饭。",
    "The weather in {place} was rainy when {name} arrived.",
    "{name} lent me a book about gardening.",
    "I bought groceries in {place} and ran into {name}.",
    "{name} told me the music school in {place} is looking for teachers.",
    "My cousin {name} moved to {place} for university.",
    "{name} and I watched a football match in {place}.",
    "I need to call {name} about the insurance papers.",
]
NAMES = ["Alice", "Bruno", "Chen Wei", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun",
         "王芳", "李强", "张伟", "Kasia", "Lars", "Mina", "Noor", "Olek", "Priya", "Quinn"]
PLACES = ["Lisbon", "Chengdu", "Oslo", "Porto", "成都", "杭州", "Berlin", "Nairobi", "Lyon", "Kyoto"]
SIZE = 2000

PROBES = {
    "landlord": "My landlord Horatio Quibble raised the rent to 1,450 euros from March.",
    "contrabassoon": "My brother-in-law plays the contrabassoon in a community orchestra.",
    "porcelain": "我表妹在景德镇学做青花瓷。",
}


def seed(config_path) -> None:
    """SIZE memories in persona "me", each with its pattern's e5 vector, a graph of its
    people and a fact entry, every stage done."""
    embedder = build_embedder(EmbeddingConfig(local_model="e5"), 1)
    pattern_vectors = embedder.embed_passages([p.format(name="someone", place="town") for p in PATTERNS])
    services = open_services(AppConfig(storage=StorageConfig(data_dir=config_path.parent / "data")), queued=False)
    service, store = services.memories, services.store
    fills = itertools.islice(itertools.cycle(itertools.product(range(len(PATTERNS)), NAMES, PLACES)), SIZE)
    rows = [(n, PATTERNS[n].format(name=name, place=place), name) for n, name, place in fills]
    ids = service.memorize_many([(text, MemoryFields(persona_id="me")) for _, text, _ in rows])
    with store.write() as tx:
        for doc_id, (n, text, name) in zip(ids, rows):
            fact = NodeSpec("fact", text[:80], text[:80].lower())
            person = NodeSpec("person", name, name.lower())
            entry = f"Fact: {text}"
            memory_graph = MemoryGraph(nodes=[fact, person], edges=[EdgeSpec(person, fact, "describes", 0.8)],
                                       entries=[EntrySpec(entry, " ".join(service.segmenter.terms(entry)), fact, 0.8)])
            entry_ids = tx.graph.replace_for_memory(doc_id, "me", memory_graph, "seed", 0.0)
            tx.vectors.upsert(VectorRow("document", doc_id, doc_id, embedder.model, pattern_vectors[n], "seed"), 0.0)
            tx.vectors.upsert(VectorRow("graph_entry", entry_ids[0], doc_id, embedder.model,
                                        pattern_vectors[n], "seed"), 0.0)
    store_sql(store, "UPDATE memory_stages SET status = 'done'")  # every stage done: no worker here
    services.close()


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    folder = tmp_path_factory.mktemp("grown")
    config = write_config(folder, embedding={"local_model": "e5"},
                          server={"exposed_tools": ["memorize", "recall", "memory_stats"]})
    seed(config)
    return config


def first_ids(session, query: str, k: int) -> list[int]:
    result = session.ok("recall", {"query": query, "k": k, "persona_id": "me"})
    return [r["id"] for r in result["results"]]


def test_new_memories_are_found_first_by_their_words_with_no_worker_running(grown):
    with front_in_process(grown) as s:
        new = {key: s.ok("memorize", {"content": text, "metadata": {"persona_id": "me"}})["id"]
               for key, text in PROBES.items()}
        assert first_ids(s, "Horatio", 15)[0] == new["landlord"]
        assert first_ids(s, "landlord rent euros", 15)[0] == new["landlord"]
        assert first_ids(s, "Who raised my rent?", 5)[0] == new["landlord"]
        assert first_ids(s, "contrabassoon", 3)[0] == new["contrabassoon"]
        assert first_ids(s, "景德镇青花瓷", 3)[0] == new["porcelain"]
        stats = s.ok("memory_stats")
        assert stats["queue"]["pending"] >= 3 * len(PROBES)  # nothing indexed them but BM25


def test_a_memory_is_found_at_once_whatever_stage_a_worker_has_reached(grown):
    """At every point a worker's progress can be seen from (no stage done, then each stage
    done in turn), the new memory is the first found by its word. The worker's own runner
    runs the stages here, one at a time, between the recalls."""
    from aokun_worker.service import WorkerService
    from shared.config import load_config
    from shared.store.model.stages import STAGES

    worker = WorkerService(open_services(load_config(grown), queued=False))
    try:
        with front_in_process(grown) as s:
            for word, text in [("bassoon", "On Thursdays I practise the bassoon with Ottilie."),
                               ("marzipan", "Grandma Edda makes marzipan pigs every December."),
                               ("Zanzibar", "We are saving up for a trip to Zanzibar.")]:
                memory_id = s.ok("memorize", {"content": text, "metadata": {"persona_id": "me"}})["id"]
                assert first_ids(s, word, 1) == [memory_id], (word, "no stage done")
                for stage in STAGES:
                    while worker.runner.run_next(stage)[0]:
                        pass
                    assert first_ids(s, word, 1) == [memory_id], (word, f"{stage} done")
    finally:
        worker.services.close()
    assert db_rows(grown, "SELECT COUNT(*) FROM memory_stages WHERE status != 'done'") == [(0,)]
