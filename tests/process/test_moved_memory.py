"""A memory moved out of a shared persona takes what was derived from it along at once, with
no worker running: its owner moves it into a private persona with edit_memory (the official
MCP client on a real HTTP front), and another user holding the shared persona no longer finds
its atoms with search_atoms (query or planned list) nor sees them on the panel's atoms page,
nor anything of it in /api/graph and its node panels (a real panel process); the owner sees
nothing stale in the private persona either. Once a worker runs again the stages derive the
memory anew in its private persona, and the shared persona still shows nothing of it.
A moved memory also leaves its conversation: its words leave its old neighbours' index rows."""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import all_processed, free_port, http_server, start_worker, stop, wait_for, write_config
from panel_helpers import panel_process
from shared.assembly import open_services
from shared.config import ALL_TOOLS, AppConfig, MemoryConfig, StorageConfig
from shared.store.model.documents import DocumentFilter, MemoryFields
from users_helpers import add_user, as_user, session

ADMIN_TOKEN = "moved-admin-secret"
SHARED, PRIVATE = "team", "alice-own"
SECRET = "The vault code is 4711. I am flying to Marseille next Friday."
SECRET_FACTS = ["The vault code is 4711", "Flying to Marseille next Friday"]
SECRET_WORDS = ("4711", "vault", "Marseille")
BEES = "Bob keeps bees on his roof in Lyon."


def atoms_of(token: str, url: str, arguments: dict) -> list[dict]:
    with session(url, token) as user:
        return user.ok("search_atoms", arguments)["atoms"]


def secret_atoms(atoms: list[dict], secret: int) -> list[str]:
    return [a["text"] for a in atoms if a["memory_id"] == secret or any(w in a["text"] for w in SECRET_WORDS)]


def panel_shows(site: SimpleNamespace, token: str, secret: int) -> list[str]:
    """What of the secret memory the panel shows a user in the shared persona: on the atoms
    page, in the graph and in every drawn node's panel."""
    found = []
    page = as_user(site, token, "GET", "/atoms", params={"persona": SHARED})
    assert page.status_code == 200, page.text[:300]
    assert "bees" in page.text  # the page shows the persona's atoms: Bob's are there
    found += [f"atoms page: {w}" for w in SECRET_WORDS if w in page.text]
    drawn = as_user(site, token, "GET", "/api/graph", params={"persona": SHARED})
    assert drawn.status_code == 200, drawn.text[:300]
    assert drawn.json()["nodes"], "the shared persona's graph is drawn"
    found += [f"graph: {w}" for w in SECRET_WORDS if w in drawn.text]
    for node in drawn.json()["nodes"]:
        detail = as_user(site, token, "GET", f"/api/graph/node/{node['id']}").json()
        found += [f"node {node['label']}: {w}" for w in SECRET_WORDS if w in str(detail)]
        found += [f"node {node['label']}: memory {secret}"
                  for m in detail["memories"] + detail["entries"] if m.get("id", m.get("memory_id")) == secret]
    return found


@pytest.fixture
def team(tmp_path):
    """Alice (shared and private personas) and Bob (the shared one); in the shared persona
    Alice's secret memory and Bob's, their atoms and graph built by a real worker that is then
    stopped; an HTTP front and a panel running."""
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(tmp_path, server={"token": ADMIN_TOKEN, "exposed_tools": list(ALL_TOOLS)},
                              embedding={"provider": "openai", "base_url": api.base_url, "model": "fake",
                                         "dimensions": 32})
        alice = add_user(config, "alice", f"{SHARED},{PRIVATE}")
        bob = add_user(config, "bob", SHARED)
        with http_server(config, free_port()) as url, panel_process(config) as (panel_url, _):
            with session(url, alice) as user:
                secret = user.ok("memorize", {"content": SECRET, "metadata": {
                    "persona_id": SHARED, "key_facts": SECRET_FACTS}})["id"]
            with session(url, bob) as user:
                user.ok("memorize", {"content": BEES, "metadata": {"persona_id": SHARED}})
            worker = start_worker(config)
            try:
                wait_for(lambda: all_processed(config, 2), 120, what="both memories processed")
            finally:
                stop(worker)
            yield {"config": config, "url": url, "alice": alice, "bob": bob, "secret": secret,
                   "panel": SimpleNamespace(url=panel_url)}


@pytest.mark.slow
def test_a_memory_moved_to_a_private_persona_leaves_the_shared_one_at_once(team):
    url, alice, bob, secret = team["url"], team["alice"], team["bob"], team["secret"]
    site = team["panel"]
    query = {"query": "vault code 4711 Marseille Friday"}
    # Before the move Bob, in the shared persona, finds the secret memory's atoms and graph.
    assert secret_atoms(atoms_of(bob, url, query), secret)
    assert panel_shows(site, bob, secret)
    with session(url, alice) as user:
        moved = user.ok("edit_memory", {"id": secret, "metadata": {"persona_id": PRIVATE}})
    assert moved["memory"]["persona_id"] == PRIVATE
    # No worker runs: still nothing of it shows in the shared persona.
    assert secret_atoms(atoms_of(bob, url, query), secret) == []
    assert secret_atoms(atoms_of(bob, url, {"types": ["planned", "factual"], "k": 15}), secret) == []
    assert panel_shows(site, bob, secret) == []
    # Nor anything stale in the private one: the stages derive it again there.
    assert secret_atoms(atoms_of(alice, url, {**query, "persona_id": PRIVATE}), secret) == []
    worker = start_worker(team["config"])
    try:
        wait_for(lambda: secret_atoms(atoms_of(alice, url, {**query, "persona_id": PRIVATE}), secret),
                 120, what="the moved memory's atoms derived again in its new persona")
        wait_for(lambda: all_processed(team["config"], 2), 120, what="the moved memory processed")
    finally:
        stop(worker)
    assert secret_atoms(atoms_of(bob, url, query), secret) == []
    assert panel_shows(site, bob, secret) == []


def test_a_moved_memory_takes_its_words_out_of_its_old_conversation(tmp_path):
    services = open_services(AppConfig(storage=StorageConfig(data_dir=tmp_path / "data"),
                                       memory=MemoryConfig(context_turns=2, context_window_s=1800)), queued=False)
    memories, store = services.memories, services.store
    start = datetime(2024, 5, 8, 13, 56)
    try:
        said = [memories.memorize(text, MemoryFields(persona_id=SHARED, session_id="call",
                                                     original_time=start + timedelta(minutes=i))).id
                for i, text in enumerate(("Alice: the vault code is 4711", "Bob: noted, thanks"))]

        def found(persona: str, word: str) -> set[int]:
            return {i for i, _ in store.documents.bm25([word], DocumentFilter(persona_id=persona), 10)}
        assert found(SHARED, "4711") == set(said)  # Bob's turn is indexed with Alice's words
        memories.edit(said[0], None, {"persona_id": PRIVATE})
        assert found(SHARED, "4711") == set() and found(PRIVATE, "4711") == {said[0]}
        assert found(SHARED, "noted") == {said[1]} and found(PRIVATE, "noted") == set()
        assert store.neighbours.of(said[1]) == []
    finally:
        services.close()
