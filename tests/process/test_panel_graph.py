"""The panel's graph page in a real browser against a real panel process: a persona's graph as the
worker's stages built it (run in this process), a click on a person opens its facts; places, organisations and other
named things drawn as such, one node for the user, relation edges labelled and read both ways
in the node panel; /api/graph answering a 3,000-node graph (its timing is scripts/bench_panel.py's)."""

from __future__ import annotations

import random
from itertools import pairwise

import httpx
import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import all_processed, db_rows, memory_service, run_every_stage, write_config
from panel_helpers import chromium_page, panel_process, screenshot
from shared.config import load_config
from shared.store import open_store
from shared.store.model.documents import MemoryFields
from shared.store.model.graph import NODE_TYPES, SELF_CANONICAL, EdgeSpec, EntrySpec, MemoryGraph, NodeSpec

pytestmark = pytest.mark.slow

ALICE = [  # (content, participants, topics)
    ("Alice adopted a grey cat named Mochi.", ["Alice"], ["pets"]),
    ("Mochi the cat hates going to the vet, Alice says.", ["Alice"], ["pets"]),
    ("Alice and Bob went hiking in the Alps last summer.", ["Alice", "Bob"], ["hiking", "travel"]),
    ("Bob is Alice's colleague at Acme. They have lunch together every day.", ["Alice", "Bob"], ["work"]),
    ("Alice works as a nurse at the city hospital.", ["Alice"], ["work"]),
    ("Alice prefers green tea over coffee.", ["Alice"], ["food"]),
    ("Carol is Alice's sister and lives in Lisbon.", ["Alice", "Carol"], ["family"]),
    ("Alice plans to visit Carol in Lisbon next Friday.", ["Alice", "Carol"], ["travel", "family"]),
    ("Alice is learning Portuguese before the Lisbon trip.", ["Alice"], ["travel", "languages"]),
    ("Bob recommended the novel Dune to Alice. She loved it.", ["Alice", "Bob"], ["books"]),
    ("Dave fixed Alice's bicycle on Sunday.", ["Alice", "Dave"], ["cycling"]),
    ("Alice and Carol cooked bacalhau together at Christmas.", ["Alice", "Carol"], ["food", "family"]),
    ("Alice 和 Bob 周末一起去爬山。", ["Alice", "Bob"], ["hiking"]),
    ("Dave and Bob play chess every Thursday evening.", ["Bob", "Dave"], ["games"]),
]
OTHER = [("Zed keeps bees on his roof.", ["Zed"], ["bees"])]
# Said by the user of persona "friends": people, a place, organisations, another named thing,
# and relations between them in both languages.
FRIENDS = [(text, [], []) for text in (
    "Mei is engaged to Tomas.",
    "Mei works as a nurse at St Mary's Hospital.",
    "I moved to Lisbon last spring.",
    "My sister Emma lives in Tokyo.",
    "王芳的丈夫是李强。",
    "李强在一家银行做会计。",
    "Acme Corp hired me as a designer.",
    "The LGBTQ support group meets on Friday.",
)]


def built(tmp_path, personas: dict[str, list]):
    """The memories of each persona (content, participants, topics), their graph built by the
    worker's stages (run here) on a fake embeddings API, and a panel on the store: yields (config, url, token)."""
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(tmp_path, embedding={"provider": "openai", "base_url": api.base_url,
                                                   "model": "fake", "dimensions": 32})
        store = open_store(load_config(config).storage)
        memories = memory_service(store)
        for persona, items in personas.items():
            for content, people, topics in items:
                memories.memorize(content, MemoryFields(persona_id=persona, participants=tuple(people),
                                                        topics=tuple(topics)))
        store.close()
        run_every_stage(config)
        assert all_processed(config, sum(map(len, personas.values())))
        with panel_process(config) as (url, token):
            yield config, url, token


@pytest.fixture
def built_graph(tmp_path):
    """A persona's memories about Alice, and one of another persona. Personas not named after
    Alice or Zed: a persona's own name is its user's node."""
    yield from built(tmp_path, {"journal": ALICE, "bees": OTHER})


@pytest.fixture
def friends_graph(tmp_path):
    yield from built(tmp_path, {"friends": FRIENDS})


def test_the_page_opens_on_the_persona_with_the_most_memories(built_graph):
    """Not the first by name ("bees" has one memory, "journal" several)."""
    config, url, token = built_graph
    assert db_rows(config, "SELECT persona_id, COUNT(*) > 1 FROM documents GROUP BY 1 ORDER BY 1") == [
        ("bees", 0), ("journal", 1)]
    with chromium_page() as page:
        page.goto(f"{url}/graph?token={token}")
        assert page.locator("#persona").input_value() == "journal"
        drawn(page)


def click_node(page, label: str) -> None:
    """A real mouse click where the library drew the node with this label."""
    x, y = page.evaluate("""label => { const cy = aokunGraph.cy;
        const node = cy.nodes().filter(n => n.data('type') !== 'fact' && n.data('label') === label)[0];
        cy.zoom(1.5); cy.center(node);
        const p = node.renderedPosition(), box = cy.container().getBoundingClientRect();
        return [box.left + p.x, box.top + p.y]; }""", label)
    page.mouse.click(x, y)


def drawn(page) -> None:
    page.wait_for_function("document.getElementById('graph').dataset.state !== 'loading'", timeout=60_000)
    assert page.locator("#graph").get_attribute("data-state") == "ready", page.locator("#graph-status").inner_text()


def test_the_graph_page_draws_a_persona_and_a_click_opens_a_person(built_graph):
    config, url, token = built_graph
    stored = db_rows(config, "SELECT type, COUNT(*) FROM graph_nodes WHERE persona_id = 'journal' GROUP BY type")
    counts = dict(stored)
    assert counts["person"] >= 4 and counts["topic"] >= 8 and counts["fact"] >= len(ALICE)
    expected_facts = {v for (v,) in db_rows(
        config, "SELECT DISTINCT f.value FROM graph_edges e JOIN graph_nodes p ON p.id = e.src_node_id"
                " JOIN graph_nodes f ON f.id = e.dst_node_id WHERE p.persona_id = 'journal'"
                " AND p.type = 'person' AND p.canonical = 'alice' AND f.type = 'fact'")}
    assert len(expected_facts) >= 10
    with chromium_page() as page:
        page.goto(f"{url}/graph?persona=journal&token={token}")
        drawn(page)
        shown = page.evaluate("""() => { const cy = aokunGraph.cy; const by = {};
            cy.nodes().forEach(n => { by[n.data('type')] = (by[n.data('type')] || 0) + 1; });
            return {nodes: cy.nodes().length, edges: cy.edges().length, by}; }""")
        assert shown["nodes"] == sum(counts.values()) and shown["by"] == counts
        assert shown["edges"] > 0
        assert page.locator("#count-person").inner_text() == f"({counts['person']})"
        assert page.locator("#graph-note").inner_text() == f"All {sum(counts.values())} nodes."
        assert "Zed" not in page.evaluate("aokunGraph.cy.nodes().map(n => n.data('label')).join('|')")
        # A real mouse click where the library drew Alice.
        click_node(page, "Alice")
        page.wait_for_selector("#node-facts li")
        assert page.locator("#node-panel h2").inner_text().endswith("Alice")
        listed = page.locator("#node-facts li").all_inner_texts()
        assert len(listed) == len(expected_facts)
        for fact in expected_facts:
            assert any(item.startswith(fact) for item in listed), fact
        alice_memories = {i for (i,) in db_rows(config, "SELECT id FROM documents WHERE persona_id = 'journal'"
                                                        " AND participants LIKE '%\"Alice\"%'")}
        assert len(alice_memories) == sum("Alice" in people for _, people, _ in ALICE)
        links = page.locator("#node-memories a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert {f"/memories/{i}" for i in alice_memories} == set(links)
        assert "Bob" in page.locator("#node-related").inner_text()
        # The find box selects a node by name; a linked node in the panel opens in turn.
        page.fill("#find", "carol")
        page.press("#find", "Enter")
        page.wait_for_function("document.querySelector('#node-panel h2')?.innerText.endsWith('Carol')")
        assert page.evaluate("aokunGraph.cy.nodes(':selected').map(n => n.data('label'))") == ["Carol"]
        page.locator("#node-related .related-node", has_text="Alice").first.click()
        page.wait_for_function("document.querySelector('#node-panel h2')?.innerText.endsWith('Alice')")
        page.evaluate("aokunGraph.cy.fit(undefined, 30)")
        screenshot(page, "graph")
        # Another persona shows only its own graph.
        page.goto(f"{url}/graph?persona=bees")
        drawn(page)
        labels = page.evaluate("aokunGraph.cy.nodes().map(n => n.data('label'))")
        assert "Zed" in labels and "Alice" not in labels


def relation_lines(page, name: str) -> list[str]:
    """Open a node by the find box, as a user would, and read its panel's relation lines."""
    page.fill("#find", name)
    page.press("#find", "Enter")
    page.wait_for_function("name => document.querySelector('#node-panel h2')?.innerText.endsWith(name)", arg=name)
    return page.locator("#node-relations li").all_inner_texts()


def test_the_graph_page_draws_typed_entities_the_user_and_relations(friends_graph):
    config, url, token = friends_graph
    counts = dict(db_rows(config, "SELECT type, COUNT(*) FROM graph_nodes WHERE persona_id = 'friends' GROUP BY type"))
    typed = set(db_rows(config, "SELECT type, value FROM graph_nodes WHERE persona_id = 'friends'"))
    assert {("place", "Lisbon"), ("place", "Tokyo"), ("organisation", "St Mary's Hospital"),
            ("organisation", "Acme Corp"), ("other", "LGBTQ"), ("person", SELF_CANONICAL)} <= typed
    assert db_rows(config, "SELECT COUNT(*) FROM graph_nodes WHERE persona_id = 'friends'"
                           " AND canonical = ?", (SELF_CANONICAL,)) == [(1,)]
    with chromium_page() as page:
        page.goto(f"{url}/graph?persona=friends&token={token}")
        drawn(page)
        nodes = page.evaluate("""() => aokunGraph.cy.nodes().map(n => ({label: n.data('label'), type: n.data('type'),
            self: n.data('self'), colour: n.style('background-color'), shape: n.style('shape')}))""")
        by_label = {n["label"]: n for n in nodes}
        assert {(by_label[v]["type"]) for v in ("Lisbon", "Tokyo")} == {"place"}
        assert by_label["St Mary's Hospital"]["type"] == by_label["Acme Corp"]["type"] == "organisation"
        assert by_label["LGBTQ"]["type"] == "other"
        # Each type in its own colour and shape, the legend's, with the stored counts.
        for node_type in NODE_TYPES:
            assert page.locator(f"#count-{node_type}").inner_text() == f"({counts.get(node_type, 0)})"
        drawn_types = {n["type"]: (n["colour"].replace(" ", ""), n["shape"]) for n in nodes}
        assert len(set(drawn_types.values())) == len(drawn_types) >= 5
        for node_type, (colour, _) in drawn_types.items():
            swatch = page.evaluate(f"getComputedStyle(document.querySelector('.swatch.{node_type}')).backgroundColor")
            assert swatch.replace(" ", "") == colour, node_type
        # One node for the user, ringed and named so.
        selves = [n for n in nodes if n["self"]]
        assert [n["label"] for n in selves] == [SELF_CANONICAL] and selves[0]["type"] == "person"
        assert page.evaluate("aokunGraph.cy.nodes('[?self]').style('border-width')") != "0px"
        # Relation edges: an arrow from A to B named with the relation (B is A's ...).
        relations = page.evaluate("""() => aokunGraph.cy.edges('[type = "relation"]').map(e => [
            e.source().data('label'), e.style('label'), e.target().data('label'), e.style('target-arrow-shape')])""")
        assert {("Mei", "fiance", "Tomas"), ("Mei", "works at", "St Mary's Hospital"),
                (SELF_CANONICAL, "lives in", "Lisbon"), (SELF_CANONICAL, "sister", "Emma"),
                ("Emma", "lives in", "Tokyo"), ("王芳", "husband", "李强")} <= {tuple(r[:3]) for r in relations}
        assert {r[3] for r in relations} == {"triangle"}
        # The node panel reads each relation from the clicked node's side, the inverse for an
        # edge that arrives: Tomas is Mei's fiance, so Mei is Tomas's; 李强 is 王芳's husband,
        # so 王芳 is 李强's wife.
        click_node(page, "Tomas")
        page.wait_for_selector("#node-relations li")
        assert page.locator("#node-panel h2").inner_text().endswith("Tomas")
        assert any(line.startswith("fiance: Mei") for line in page.locator("#node-relations li").all_inner_texts())
        assert any(line.startswith("wife: 王芳") for line in relation_lines(page, "李强"))
        assert any(line.startswith("husband: 李强") for line in relation_lines(page, "王芳"))
        mei = relation_lines(page, "Mei")
        assert any(line.startswith("fiance: Tomas") for line in mei)
        assert any(line.startswith("works at: St Mary's Hospital") for line in mei)
        assert any(line.startswith("employs: Mei") for line in relation_lines(page, "St Mary's Hospital"))
        user = relation_lines(page, SELF_CANONICAL)
        assert any(line.startswith("lives in: Lisbon") for line in user)
        assert any(line.startswith("sister: Emma") for line in user)
        assert "the user" in page.locator("#node-panel .self-note").inner_text().lower()
        assert any(line.startswith(f"home of: {SELF_CANONICAL}") for line in relation_lines(page, "Lisbon"))
        # A relation line opens the node it names.
        page.locator("#node-relations .related-node", has_text=SELF_CANONICAL).first.click()
        page.wait_for_function(f"document.querySelector('#node-panel h2')?.innerText.endsWith('{SELF_CANONICAL}')")
        page.wait_for_timeout(400)  # the pan to the selected node ends, then the whole graph is shown
        page.evaluate("aokunGraph.cy.fit(undefined, 30)")
        screenshot(page, "graph-relations")


def seed_big_graph(store, persona: str, memories: int) -> None:
    """~9 nodes per memory, shaped as the graph stage shapes them: 8 facts of its own, 2 of
    60 persons and 2 of 240 topics (a few of each far more common than the rest) describing
    every fact, facts chained in order, persons and topics co-occurring, the two persons
    friends."""
    rng = random.Random(7)
    pick = lambda pool: int(pool * rng.random() ** 2)  # noqa: E731 - small indexes are common
    service = memory_service(store)
    ids = service.memorize_many([(f"note {i}", MemoryFields(persona_id=persona)) for i in range(memories)])
    with store.write() as tx:
        for n, memory_id in enumerate(ids):
            people = [NodeSpec("person", f"Person{k}", f"person{k}") for k in {pick(60), pick(60)}]
            topics = [NodeSpec("topic", f"topic {k}", f"topic {k}") for k in {pick(240), pick(240)}]
            facts = [NodeSpec("fact", f"fact {j} of memory {n}", f"fact {j} of memory {n}") for j in range(8)]
            hubs = people + topics
            edges = [EdgeSpec(h, f, "describes", 0.8) for h in hubs for f in facts]
            edges += [EdgeSpec(a, b, "mentioned_in", 0.7) for a, b in pairwise(facts)]
            edges += [EdgeSpec(a, b, "co_occurs_with", 0.8) for i, a in enumerate(hubs) for b in hubs[i + 1:]]
            edges += [EdgeSpec(a, b, "relation", 0.8, relation="friend") for a, b in pairwise(people)]
            entries = [EntrySpec(f"Fact: {f.value}", f.value, f, 0.8) for f in facts]
            tx.graph.replace_for_memory(memory_id, persona, MemoryGraph(hubs + facts, edges, entries), "h", 1.0)


def test_the_graph_api_answers_a_3000_node_graph(tmp_path):
    config = write_config(tmp_path)
    store = open_store(load_config(config).storage)
    seed_big_graph(store, "big", 333)
    store.close()
    total = db_rows(config, "SELECT COUNT(*) FROM graph_nodes WHERE persona_id = 'big'")[0][0]
    assert 2900 <= total <= 3100
    with panel_process(config) as (url, token):
        cookies = {"aokun_panel": token}
        with httpx.Client(base_url=url, cookies=cookies, timeout=30) as client:
            response = client.get("/api/graph", params={"persona": "big"})
            assert response.status_code == 200
            data = response.json()
            assert len(data["nodes"]) == total and not data["capped"]
            assert data["counts"]["person"] + data["counts"]["topic"] + data["counts"]["fact"] == total
            # Every stored pair and type is one edge, but relations one per direction.
            pairs = {(min(s, d), max(s, d), t) for s, d, t in db_rows(
                config, "SELECT src_node_id, dst_node_id, type FROM graph_edges WHERE type != 'relation'")}
            friends = set(db_rows(config, "SELECT src_node_id, dst_node_id FROM graph_edges WHERE type = 'relation'"))
            assert len(data["edges"]) == len(pairs) + len(friends)
            assert {(s, d) for s, d, t, _, _ in data["edges"] if t == "relation"} == friends
            assert {label for _, _, t, _, label in data["edges"] if t == "relation"} == {"friend"}
            assert all(label is None for _, _, t, _, label in data["edges"] if t != "relation")
            # Capped: the most connected first, and the answer says so.
            small = client.get("/api/graph", params={"persona": "big", "limit": 100}).json()
            assert small["capped"] and small["shown"] == 100 and small["total"] == total
            degrees = [n["degree"] for n in small["nodes"]]
            assert degrees == sorted(degrees, reverse=True)
            assert min(degrees) >= max(n["degree"] for n in data["nodes"][100:])
            shown = {n["id"] for n in small["nodes"]}
            assert all(source in shown and target in shown for source, target, *_ in small["edges"])
            hub = data["nodes"][0]
            detail = client.get(f"/api/graph/node/{hub['id']}")
            assert detail.status_code == 200 and detail.json()["facts"]
            person = next(n for n in data["nodes"] if n["type"] == "person")
            lines = client.get(f"/api/graph/node/{person['id']}").json()["relations"]
            assert lines and {line["relation"] for line in lines} == {"friend"}
            bad = client.get("/api/graph", params={"persona": "big", "limit": "lots"})
            assert bad.status_code == 400 and "limit must be a whole number" in bad.json()["error"]
            nobody = client.get("/api/graph", params={"persona": "nobody"}).json()
            assert nobody["total"] == 0 and nobody["nodes"] == [] and not nobody["capped"]
            gone = client.get("/api/graph/node/999999")
            assert gone.status_code == 404 and "not found" in gone.json()["error"]
        with chromium_page() as page:
            page.goto(f"{url}/graph?persona=big&token={token}")
            drawn(page)
            assert page.evaluate("aokunGraph.cy.nodes().length") == total
            page.goto(f"{url}/graph?persona=big&limit=500")
            drawn(page)
            assert page.evaluate("aokunGraph.cy.nodes().length") == 500
            assert page.locator("#graph-note").inner_text().startswith(f"Showing the 500 most connected of {total:,}")
