"""Recall end to end in the real front (in-process client): both routes, explain, filters,
cache, reinforcement, ablation and fallback. Graph rows are written through the store API."""

from __future__ import annotations

import time

import pytest

from aokun_server.app import build_front
from fake_openai import FakeEmbeddingsServer
from helpers import mcp_session, memory_service, wait_for, write_config
from shared.config import load_config
from shared.embedders.openai import OpenAIEmbedder
from shared.store import open_store
from shared.store.model.documents import DocumentFilter, MemoryFields
from shared.store.model.graph import EdgeSpec, EntrySpec, MemoryGraph, NodeSpec
from shared.store.model.vectors import VectorRow


@pytest.fixture
def api():
    with FakeEmbeddingsServer(dim=64) as server:
        yield server


def front_for(tmp_path, api, **retrieval):
    config = write_config(tmp_path, embedding={"provider": "openai", "base_url": api.base_url,
                                               "model": "fake", "dimensions": 64, "max_retries": 0},
                          retrieval=retrieval)
    return build_front(load_config(config))


def embed_documents(front, api):
    """What the worker's embed stage does, done here: every document gets its vector."""
    embedder = OpenAIEmbedder(api.base_url, "fake", "", 64)
    store = front.services.store
    docs, _ = store.documents.list(1000, 0, DocumentFilter(include_archived=True))
    with store.write() as tx:
        for doc, vec in zip(docs, embedder.embed_passages([d.text for d in docs])):
            tx.vectors.upsert(VectorRow("document", doc.id, doc.id, "openai:fake", vec, doc.content_hash), 1.0)


def person(name):
    return NodeSpec("person", name, name.lower())


def write_graph(front, memory_id, nodes, edges, entries, api=None):
    seg = front.services.segmenter
    specs = [EntrySpec(text, " ".join(seg.terms(text)), node, 0.8) for text, node in entries]
    with front.services.store.write() as tx:
        ids = tx.graph.replace_for_memory(memory_id, None, MemoryGraph(nodes, edges, specs), "h", 1.0)
        if api is not None:
            embedder = OpenAIEmbedder(api.base_url, "fake", "", 64)
            for entry_id, vec in zip(ids, embedder.embed_passages([t for t, _ in entries])):
                tx.vectors.upsert(VectorRow("graph_entry", entry_id, memory_id, "openai:fake", vec, "h"), 1.0)
    return ids


def test_graph_keyword_route_reaches_memories_through_nodes_and_neighbours(tmp_path, api):
    front = front_for(tmp_path, api, channels=["graph_keyword"])
    with mcp_session(front.server) as s:
        lunch = s.ok("memorize", {"content": "had lunch with Alice at the canteen"})["id"]
        acme = s.ok("memorize", {"content": "the quarterly review went well"})["id"]
        s.ok("memorize", {"content": "unrelated note about the weather"})
        alice, acme_node = person("Alice"), NodeSpec("topic", "Acme", "acme")
        write_graph(front, lunch, [alice], [], [("Person: Alice. Summary: lunch at the canteen", alice)])
        write_graph(front, acme, [acme_node], [EdgeSpec(alice, acme_node, "co_occurs_with", 0.9)],
                    [("Fact: quarterly review at Acme", acme_node)])
        results = s.ok("recall", {"query": "Alice", "explain": True})["results"]
        assert {r["id"] for r in results} == {lunch, acme}  # the weather note has no path to Alice
        explained = {r["id"]: r["explain"] for r in results}
        assert explained[lunch]["channels"]["graph_keyword"]["rank"] >= 1
        assert "graph" in explained[acme]["parts"] and "document" not in explained[acme]["parts"]
        # The entry's own words find it too (FTS over graph entries).
        assert s.ok("recall", {"query": "quarterly"})["results"][0]["id"] == acme


def test_graph_vector_channel_and_both_routes_bonus(tmp_path, api):
    front = front_for(tmp_path, api)
    with mcp_session(front.server) as s:
        mid = s.ok("memorize", {"content": "Bob mentors Carol on machine learning"})["id"]
        s.ok("memorize", {"content": "grocery list: milk, eggs"})
        embed_documents(front, api)
        write_graph(front, mid, [person("Bob"), person("Carol")],
                    [EdgeSpec(person("Bob"), person("Carol"), "co_occurs_with", 0.9)],
                    [("Fact: Bob mentors Carol", person("Bob"))], api=api)
        top = s.ok("recall", {"query": "Bob mentors Carol", "explain": True})["results"][0]
        assert top["id"] == mid
        channels = top["explain"]["channels"]
        assert set(channels) == {"bm25", "vector", "graph_keyword", "graph_vector"}
        assert top["explain"]["parts"]["routes"]["both_routes_bonus"] is True
        assert top["score"] == pytest.approx(top["explain"]["parts"]["final"])


def test_explain_parts_follow_the_formula(tmp_path, api):
    front = front_for(tmp_path, api, mmr_enabled=False)
    with mcp_session(front.server) as s:
        mid = s.ok("memorize", {"content": "the spare key is under the blue flowerpot",
                                "metadata": {"importance": 0.9}})["id"]
        hit = s.ok("recall", {"query": "spare key", "explain": True})["results"][0]
        assert hit["id"] == mid
        doc = hit["explain"]["parts"]["document"]
        assert doc["fused"] == 1.0 and doc["importance"] == 0.9 and doc["recency"] == pytest.approx(1.0, abs=1e-3)
        assert doc["score"] == pytest.approx(0.5 * 1.0 + 0.25 * 0.9 + 0.25 * doc["recency"])
        assert hit["explain"]["channels"]["bm25"]["rank"] == 1
        assert s.ok("recall", {"query": "spare key"})["results"][0].get("explain") is None


def test_since_until_filter_on_original_time(tmp_path, api):
    front = front_for(tmp_path, api)
    with mcp_session(front.server) as s:
        old = s.ok("memorize", {"content": "dentist appointment", "metadata": {"original_time": "2023-01-10"}})["id"]
        new = s.ok("memorize", {"content": "dentist appointment again",
                                "metadata": {"original_time": "2024-06-01T09:00:00"}})["id"]
        s.ok("memorize", {"content": "dentist with no date"})
        ids = lambda **kw: {r["id"] for r in s.ok("recall", {"query": "dentist", **kw})["results"]}  # noqa: E731
        assert ids(since="2024-01-01") == {new}
        assert ids(until="2023-12-31T23:59:59") == {old}
        assert ids(since="2023-01-01", until="2024-12-31") == {old, new}
        assert "since" in s.error("recall", {"query": "dentist", "since": "last year"})
        assert "after until" in s.error("recall", {"query": "dentist", "since": "2025-01-01", "until": "2024-01-01"})


def test_access_reinforcement_after_the_reply(tmp_path, api):
    front = front_for(tmp_path, api)
    with mcp_session(front.server) as s:
        mid = s.ok("memorize", {"content": "remember the milk"})["id"]
        s.ok("recall", {"query": "milk"})
        doc = lambda: front.services.store.documents.get(mid)  # noqa: E731
        wait_for(lambda: doc().access_count == 1, 10, what="access count")
        assert doc().last_access_time == pytest.approx(time.time(), abs=10)


def test_cache_is_invalidated_by_a_write_from_another_process(tmp_path, api):
    front = front_for(tmp_path, api)
    with mcp_session(front.server) as s:
        s.ok("memorize", {"content": "the garden shed needs paint"})
        first = s.ok("recall", {"query": "garden shed"})["results"]
        assert s.ok("recall", {"query": "garden shed"})["results"] == first
        assert len(front.recaller.cache) == 1
        # Another process (its own connections) writes: the next recall must see it at once.
        other = open_store(front.live.at_start.storage)
        memory_service(other, front.live.at_start.text).memorize("garden shed key is lost", MemoryFields())
        other.close()
        assert len(s.ok("recall", {"query": "garden shed"})["results"]) == 2


def test_channels_switch_off_for_ablation(tmp_path, api):
    front = front_for(tmp_path, api, channels=["vector"])
    with mcp_session(front.server) as s:
        mid = s.ok("memorize", {"content": "zebra crossing near the school"})["id"]
        assert s.ok("recall", {"query": "zebra"})["results"] == []  # no vector yet, BM25 is off
        embed_documents(front, api)
        hit = s.ok("recall", {"query": "zebra crossing", "explain": True})["results"][0]
        assert hit["id"] == mid and set(hit["explain"]["channels"]) == {"vector"}


def test_fallback_when_the_embedder_is_down(tmp_path, api):
    front = front_for(tmp_path, api)
    with mcp_session(front.server) as s:
        mid = s.ok("memorize", {"content": "bicycle tyre pressure is 4 bar"})["id"]
        embed_documents(front, api)
        api.fail_next = 10**6
        hit = s.ok("recall", {"query": "bicycle tyre", "explain": True})["results"][0]
        assert hit["id"] == mid and "vector" not in hit["explain"]["channels"]
    (tmp_path / "strict").mkdir()
    api.fail_next = 0
    strict = front_for(tmp_path / "strict", api, fallback_enabled=False, cache_enabled=False)
    with mcp_session(strict.server) as s:
        s.ok("memorize", {"content": "bicycle tyre pressure is 4 bar"})
        embed_documents(strict, api)
        api.fail_next = 10**6
        assert "embedding API answered HTTP 500" in s.error("recall", {"query": "bicycle"})
