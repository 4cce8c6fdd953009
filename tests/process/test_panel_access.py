"""Each user to their own personas, in the panel and in export: a user's token tries every
route of a real panel process (enumerated from the app itself, so a new route is tried too)
against another user's persona, memory ids and graph nodes, and nothing of the other persona
is read (no text, no id, no count) or changed (checked in the store afterwards); the admin's
pages refuse the user in the page's language; the user sees and edits its own memories; a
revoked token is refused at its next request; `aokun export --token` holds only the token's
personas."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from starlette.routing import Mount, Route

from aokun_panel.access import ADMIN_ROUTES, PERSONA_FREE_ROUTES, SCOPED_ROUTES, guarded
from aokun_panel.app import build_app
from aokun_panel.i18n import translate
from fake_openai import FakeEmbeddingsServer
from helpers import all_processed, aokun_in_process, db_rows, run_every_stage, seed_memories, write_config
from panel_helpers import chromium_page, collect_problems, panel_process, screenshot
from users_helpers import add_user, as_user

pytestmark = pytest.mark.slow

ADMIN_TOKEN = "panel-admin-secret"
BEN = "ben-private"
BEN_TEXTS = ("Ben keeps the marmalade recipe in the Zanzibar safe, code 8812",
             "Ben met Carla Quixote in Zanzibar at the harbour")
BEN_WORDS = ("marmalade", "Zanzibar", "8812", "Quixote", "Carla")
AMY_TEXTS = {"amy-home": ("Amy plays the violin in Porto", "Amy grows tomatoes on the balcony"),
             "amy-work": ("Amy works at the Lisbon observatory",)}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("panel-access")
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(folder, server={"token": ADMIN_TOKEN},
                              embedding={"provider": "openai", "base_url": api.base_url, "model": "fake",
                                         "dimensions": 32})
        ben_ids = seed_memories(config, BEN, *BEN_TEXTS)
        amy_ids = {persona: seed_memories(config, persona, *texts) for persona, texts in AMY_TEXTS.items()}
        total = len(ben_ids) + sum(len(ids) for ids in amy_ids.values())
        # Atoms, graph and vectors built, so every page has something of Ben's to hide; Amy's
        # memory first, as a worker takes the one its queue message names: her graph nodes then
        # hold the lowest ids, the same numbers as Ben's memory ids.
        run_every_stage(config, first=amy_ids["amy-home"][0])
        assert all_processed(config, total)
        amy = add_user(config, "amy", "amy-home,amy-work")
        add_user(config, "ben", BEN)
        with panel_process(config) as (url, start_token):
            yield SimpleNamespace(url=url, start_token=start_token, config=config, amy=amy,
                                  ben_ids=ben_ids, amy_ids=amy_ids)


def served_routes() -> list[Route]:
    """The routes of the app the panel serves, as build_app assembles them (guards included)."""
    app = build_app(SimpleNamespace(live=None), "unused", 0)
    starlette = app.app.app  # ServerTiming -> PanelGate -> Starlette
    return [r for r in starlette.routes if not isinstance(r, Mount)]


def ben_rows(site) -> list[tuple]:
    return db_rows(site.config, "SELECT id, text, pinned, archived, persona_id, importance FROM documents"
                                " WHERE persona_id = ? ORDER BY id", (BEN,))


def shows_ben(body: str, ben_ids, node_ids) -> list[str]:
    """What of Ben's a response shows: his words, links to his memories, and in a JSON answer
    records of his memories and nodes. An id is told by the record it names, not by its
    number alone: the tables number their rows apart, so Amy's graph node 1 is not Ben's
    memory 1."""
    found = [word for word in BEN_WORDS if word.lower() in body.lower()]
    for memory_id in ben_ids:
        found += re.findall(rf'/memories/{memory_id}\b', body)
    try:
        answer = json.loads(body)
    except ValueError:  # a page: no records but its text and links
        return found
    memories, nodes = named_ids(answer)
    return (found + [f"memory {i}" for i in sorted(memories & set(ben_ids))]
            + [f"graph node {i}" for i in sorted(nodes & set(node_ids))])


NODE_RECORDS = ("nodes", "node", "relations", "related", "facts")


def named_ids(value, kind: str = "memory") -> tuple[set[int], set[int]]:
    """(memory ids, graph node ids) a JSON answer names: "memory_id" and "memory_ids" name
    memories; an "id" names a node in a record under one of NODE_RECORDS, else a memory (a
    memory's answer, its "memories"); an edge [source, target, ...] names two nodes."""
    memories: set[int] = set()
    nodes: set[int] = set()
    if isinstance(value, list):
        for item in value:
            found = named_ids(item, kind)
            memories |= found[0]
            nodes |= found[1]
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "id" and isinstance(item, int):
                (nodes if kind == "node" else memories).add(item)
            elif key == "memory_id" and isinstance(item, int):
                memories.add(item)
            elif key == "memory_ids":
                memories |= set(item)
            elif key == "edges":
                nodes |= {end for edge in item for end in edge[:2]}
            else:
                found = named_ids(item, "node" if key in NODE_RECORDS else "memory" if key in (
                    "memories", "memory") else kind)
                memories |= found[0]
                nodes |= found[1]
    return memories, nodes


def test_every_route_has_an_access_rule():
    paths = {route.path for route in served_routes()}
    assert paths == ADMIN_ROUTES | SCOPED_ROUTES, paths ^ (ADMIN_ROUTES | SCOPED_ROUTES)

    async def new_page(request):
        return None
    with pytest.raises(RuntimeError, match="no access rule"):
        guarded([Route("/new-page", new_page)], None)


def test_an_id_is_told_by_the_record_it_names():
    ben_memories, ben_nodes = [1, 2], [3, 4]
    amys_graph = json.dumps({"nodes": [{"id": 1, "type": "person", "label": "Amy"}], "edges": [[1, 5, "x", 1, None]]})
    assert shows_ben(amys_graph, ben_memories, ben_nodes) == []  # her node 1, not his memory 1
    assert shows_ben(json.dumps({"nodes": [{"id": 3}]}), ben_memories, ben_nodes) == ["graph node 3"]
    assert shows_ben(json.dumps({"edges": [[7, 4, "x", 1, None]]}), ben_memories, ben_nodes) == ["graph node 4"]
    assert shows_ben(json.dumps({"id": 2, "memory": {"id": 2}}), ben_memories, ben_nodes) == ["memory 2"]
    node = {"node": {"id": 9}, "facts": [{"id": 3, "memory_ids": [1]}], "entries": [{"memory_id": 2}],
            "memories": [{"id": 4}]}
    assert shows_ben(json.dumps(node), ben_memories, ben_nodes) == ["memory 1", "memory 2", "graph node 3"]
    assert shows_ben('<a href="/memories/2">Zanzibar</a>', ben_memories, ben_nodes) == ["Zanzibar", "/memories/2"]


def test_a_users_token_reads_and_changes_nothing_of_another_persona(site):
    before, config_before = ben_rows(site), site.config.read_bytes()
    nodes = [row[0] for row in db_rows(site.config, "SELECT id FROM graph_nodes WHERE persona_id = ?", (BEN,))]
    assert len(before) == 2 and nodes, (before, nodes)
    tried = 0
    for route in served_routes():
        for method in sorted(route.methods - {"HEAD"}):
            ids = {"memory_id": site.ben_ids, "node_id": nodes}
            named = [name for name in ids if "{" + name in route.path]
            targets = ids[named[0]] if named else [None]
            for target in targets:
                path = re.sub(r"\{\w+:int\}", str(target), route.path)
                for query in ({}, {"persona": BEN}, {"persona": BEN, "q": "recipe harbour safe"},
                              {"q": "recipe harbour safe"}):
                    if method != "GET" and query:
                        continue
                    body = ({"pinned": True} if path.endswith("/pin") else {"content": "overwritten by amy"}
                            if path.startswith("/api/memories/") else {})
                    answer = as_user(site, site.amy, method, path, params=query,
                                     json=body if method == "POST" else None)
                    tried += 1
                    where = f"{method} {path} {query}"
                    assert answer.status_code < 500, (where, answer.text[:300])
                    assert not shows_ben(answer.text, site.ben_ids, nodes), (where, shows_ben(
                        answer.text, site.ben_ids, nodes), answer.text[:500])
                    if route.path in ADMIN_ROUTES:
                        assert answer.status_code in (303, 403), (where, answer.status_code)
                    elif route.path not in PERSONA_FREE_ROUTES and (named or query.get("persona") == BEN):
                        assert answer.status_code in (403, 404), (where, answer.status_code)
    assert tried > 60
    assert ben_rows(site) == before  # nothing of Ben's changed: text, pin, archive, persona
    assert site.config.read_bytes() == config_before  # nor the settings
    # The admin (server.token) still reads Ben's memories on the same panel: they were there.
    admin = as_user(site, ADMIN_TOKEN, "GET", "/memories", params={"persona": BEN})
    assert admin.status_code == 200 and "Zanzibar" in admin.text


def test_the_admins_pages_refuse_a_user_in_its_language(site):
    for lang, accept in (("en", "en"), ("zh", "zh-CN,zh;q=0.9")):
        page = as_user(site, site.amy, "GET", "/settings", headers={"Accept-Language": accept})
        assert page.status_code == 403
        assert translate(lang, "access.admin_only") in html.unescape(page.text)
        assert 'href="/settings"' not in page.text  # the navigation leaves the admin's pages out
        api = as_user(site, site.amy, "GET", "/api/overview", headers={"Accept-Language": accept})
        assert api.status_code == 403 and api.json()["error"] == translate(lang, "access.admin_only")
    home = as_user(site, site.amy, "GET", "/")
    assert home.status_code == 303 and home.headers["location"] == "/memories"
    assert as_user(site, site.start_token, "GET", "/settings").status_code == 200
    assert as_user(site, ADMIN_TOKEN, "GET", "/api/overview").status_code == 200


def test_a_user_sees_and_edits_its_own_memories(site):
    listed = as_user(site, site.amy, "GET", "/memories")
    assert listed.status_code == 200
    assert "Amy plays the violin in Porto" in listed.text  # its first persona, by default
    personas = re.findall(r'<option value="([^"]*)">', listed.text.split('id="personas"')[1].split("</datalist>")[0])
    assert personas == ["amy-home", "amy-work"]
    work = as_user(site, site.amy, "GET", "/memories", params={"persona": "amy-work"})
    assert "Lisbon observatory" in work.text and "violin" not in work.text
    own = site.amy_ids["amy-home"][1]
    assert as_user(site, site.amy, "GET", f"/memories/{own}").status_code == 200
    edited = as_user(site, site.amy, "POST", f"/api/memories/{own}", json={"content": "Amy grows basil now"})
    assert edited.status_code == 200, edited.text
    pinned = as_user(site, site.amy, "POST", f"/api/memories/{own}/pin", json={"pinned": True})
    assert pinned.status_code == 200, pinned.text
    [(text, pin)] = db_rows(site.config, "SELECT text, pinned FROM documents WHERE id = ?", (own,))
    assert text.endswith("Amy grows basil now") and pin == 1
    # Moving its memory to Ben's persona is refused, naming only its own personas.
    moved = as_user(site, site.amy, "POST", f"/api/memories/{own}", json={"metadata": {"persona_id": BEN}})
    assert moved.status_code == 403 and "amy-home" in moved.json()["error"]
    assert db_rows(site.config, "SELECT persona_id FROM documents WHERE id = ?", (own,)) == [("amy-home",)]
    atoms = as_user(site, site.amy, "GET", "/atoms", params={"persona": "amy-work"})
    assert atoms.status_code == 200 and 'id="atom-counts"' not in atoms.text  # store-wide counts: admin's
    graph = as_user(site, site.amy, "GET", "/api/graph", params={"persona": "amy-work"})
    assert graph.status_code == 200 and graph.json()["persona"] == "amy-work"


def test_a_revoked_token_is_refused_at_its_next_request(site):
    token = add_user(site.config, "dora", "amy-work")
    assert as_user(site, token, "GET", "/memories").status_code == 200
    done = aokun_in_process("users", "revoke", "dora", "--config", site.config)
    assert done.returncode == 0, done.stderr
    refused = as_user(site, token, "GET", "/memories")
    assert refused.status_code == 401 and "Lisbon" not in refused.text
    cookie = httpx.get(f"{site.url}/memories", cookies={"aokun_panel": token}, timeout=30)
    assert cookie.status_code == 401


def exported(path: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return lines[0], lines[1:]


def test_export_with_a_users_token_holds_only_its_personas(site, tmp_path):
    config, mine = site.config, tmp_path / "amy.jsonl"
    done = aokun_in_process("export", str(mine), f"--token={site.amy}", "--config", config)
    assert done.returncode == 0, done.stderr
    _, rows = exported(mine)
    assert {row["persona_id"] for row in rows} == {"amy-home", "amy-work"}
    assert not any(word in mine.read_text(encoding="utf-8") for word in BEN_WORDS)
    # The same through AOKUN_TOKEN, one persona at a time, and as Markdown.
    env = {**os.environ, "AOKUN_TOKEN": site.amy}
    work = tmp_path / "work.jsonl"
    assert aokun_in_process("export", str(work), "--persona", "amy-work", "--config", config, env=env).returncode == 0
    assert {row["persona_id"] for row in exported(work)[1]} == {"amy-work"}
    folder = tmp_path / "notes"
    assert aokun_in_process("export", str(folder), "--format", "markdown", "--config", config, env=env).returncode == 0
    text = "".join(p.read_text(encoding="utf-8") for p in folder.iterdir())
    assert "Porto" in text and not any(word in text for word in BEN_WORDS)
    # Ben's persona named with Amy's token: refused, nothing written.
    theirs = tmp_path / "ben.jsonl"
    refused = aokun_in_process("export", str(theirs), "--persona", BEN, f"--token={site.amy}", "--config", config)
    assert refused.returncode != 0 and not theirs.exists() and "amy-home" in refused.stderr
    bad = aokun_in_process("export", str(theirs), "--token", "not-a-token", "--config", config)
    assert bad.returncode != 0 and not theirs.exists()
    # Without a token the export is the admin's, every persona, as before.
    everything = tmp_path / "all.jsonl"
    assert aokun_in_process("export", str(everything), "--config", config).returncode == 0
    assert BEN in {row["persona_id"] for row in exported(everything)[1]}


def test_a_user_logs_in_with_its_token_and_sees_only_its_personas(site):
    with chromium_page() as page:
        problems = collect_problems(page)
        page.goto(f"{site.url}/?token={site.amy}")
        assert page.url.endswith("/memories")
        nav = page.locator("header nav").inner_text()
        assert "Memories" in nav and "Settings" not in nav and "Overview" not in nav
        options = page.locator("#personas option").evaluate_all("els => els.map(e => e.value)")
        assert options == ["amy-home", "amy-work"]
        assert "Porto" in page.content() and "Zanzibar" not in page.content()
        page.goto(f"{site.url}/graph")  # the cookie carries the token now
        select = page.locator("#persona option").evaluate_all("els => els.map(e => e.value)")
        assert select == ["amy-home", "amy-work"]
        screenshot(page, "panel-user-graph")
        assert not [p for p in problems if "HTTP 4" in p or "error" in p], problems
