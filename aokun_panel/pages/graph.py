"""Graph: a persona's knowledge graph drawn in the browser (cytoscape.js, laid out by
d3-force, both vendored), capped at its most connected nodes: people, places, organisations,
other named things, topics and facts, the user's own node marked, typed relations drawn as
labelled arrows. A click on a node opens its relations (both ways, in words), facts and
source memories.

The page itself reads only the persona list; the drawing comes from /api/graph (timed at
3,000 nodes by scripts/bench_panel.py), a node's side panel from /api/graph/node/<id>.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aokun_panel.access import principal_of
from aokun_panel.i18n import language_of, translate
from aokun_panel.render import Page, render
from shared.access import ADMIN, Principal, view_persona
from shared.errors import AccessDenied
from shared.extract.relation_words import vocabulary
from shared.store.model.documents import DocumentFilter, unmarked
from shared.store.model.graph import NODE_TYPES, SELF_CANONICAL

PAGE = Page("/graph", "Graph")
# Drawn at most: the most connected nodes. 3,000 nodes and 15,000 edges are laid out and drawn
# in ~3.5 s and then pan and zoom at ~20 ms a frame (headless Chromium on this 2-core machine);
# beyond that a picture of everything says less than the part a user can read.
NODE_CAP = 3000
MAX_NODE_CAP = 5000
PERSONAS_SHOWN = 500
PERSONAS_COUNTED = 100     # personas whose memories are counted to choose the first one shown
COUNT_CAP = 10_000
LINKS_SHOWN = 200
RELATIONS_SHOWN = 100
MEMORIES_SHOWN = 20
LABEL_CHARS = 60
SNIPPET_CHARS = 200


# -- reads (on the reader's thread) ---------------------------------------------------------


def graph_data(s, persona: str, limit: int) -> dict:
    """The persona's `limit` most connected nodes and the edges among them: one edge per pair
    and type (with how many memories it comes from), but relation edges one per direction and
    relation, with the relation's label ("works at")."""
    counts = s.graph_browse.persona_node_counts(persona)
    rows = s.graph_browse.most_connected(persona, limit)
    merged: dict[tuple[int, int, str, str | None], int] = {}
    for src, dst, edge_type, relation, memories in s.graph_browse.edges_among([r[0] for r in rows]):
        if src != dst:
            # An edge reads one way only when it is a relation: B is A's wife, not A B's.
            key = (src, dst, edge_type, relation) if relation else (min(src, dst), max(src, dst), edge_type, None)
            merged[key] = merged.get(key, 0) + memories
    total = sum(counts.values())
    words = vocabulary()
    return {
        "persona": persona, "counts": counts, "total": total, "shown": len(rows),
        "capped": total > len(rows), "limit": limit,
        "nodes": [_drawn_node(*row) for row in rows],
        # [source, target, type, memories, relation label or None]: lists, not objects, at
        # tens of thousands of edges
        "edges": [[a, b, t, m, words.label(r) if r else None] for (a, b, t, r), m in merged.items()],
    }


def _drawn_node(node_id: int, node_type: str, value: str, canonical: str, degree: int) -> dict:
    node = {"id": node_id, "type": node_type, "label": _short(_name(value, canonical), LABEL_CHARS),
            "degree": degree}
    if canonical == SELF_CANONICAL and node_type == "person":
        node["self"] = True
    return node


def _name(value: str, canonical: str) -> str:
    """A node's name as drawn: the user's node says it is the user, also when it was first
    written as the persona's own name ("Alice (the user)")."""
    if canonical != SELF_CANONICAL or value == SELF_CANONICAL:
        return value
    return f"{value} ({SELF_CANONICAL})"


def relation_lines(s, node_id: int) -> list[dict]:
    """A node's relations in words, from its side: an edge (A, wife, B) is "wife: B" for A and
    "husband: A" (the inverse) for B."""
    words = vocabulary()
    lines = []
    for outgoing, relation, other_id, other_type, other_value, memories in s.graph_browse.node_relations(
            node_id, RELATIONS_SHOWN):
        seen_from_here = relation if outgoing else words.inverse(relation)
        lines.append({"relation": words.label(seen_from_here), "id": other_id, "type": other_type,
                      "label": _short(other_value, LABEL_CHARS), "memories": memories})
    return lines


def node_detail(s, node_id: int, principal: Principal = ADMIN) -> dict | None:
    """One node for the side panel: its relations, its facts (an entity's or topic's linked
    fact nodes, or a fact itself with its entries), the nodes it links to otherwise, and its
    source memories. None when missing, or of a persona the principal does not hold (a graph
    is one persona's: its nodes link only within it)."""
    row = s.graph_browse.node_row(node_id)
    if row is None or not principal.holds(row["persona_id"]):
        return None
    links = s.graph_browse.node_links(node_id, LINKS_SHOWN)
    if row["type"] == "fact":
        entries = s.graph_browse.node_entries(node_id, MEMORIES_SHOWN)
        facts = [{"id": row["id"], "text": row["value"],
                  "memory_ids": sorted({e["source_memory_id"] for e in entries}, reverse=True)}]
    else:
        entries = []
        facts = [{"id": link["id"], "text": link["value"], "memory_ids": _ids(link["memory_ids"])}
                 for link in links if link["type"] == "fact"]
    # Relation edges are listed as relations, in words, not again as links.
    related = [{"id": link["id"], "type": link["type"], "label": _short(link["value"], LABEL_CHARS),
                "edge": link["edge_type"], "memories": link["memories"]}
               for link in links if link["edge_type"] != "relation"
               and (row["type"] == "fact" or link["type"] != "fact")]
    return {
        "node": {"id": row["id"], "type": row["type"], "value": _name(row["value"], row["canonical"]),
                 "self": row["canonical"] == SELF_CANONICAL and row["type"] == "person",
                 "persona": row["persona_id"], "forms": json.loads(row["forms"] or "[]")},
        "relations": relation_lines(s, node_id), "facts": facts, "related": related,
        "entries": [{"text": e["text"], "memory_id": e["source_memory_id"], "atom_id": e["atom_id"]}
                    for e in entries],
        **_memories(s, node_id),
    }


def _memories(s, node_id: int) -> dict:
    """The node's source memories (most confident, then newest, first) with a snippet each,
    and how many there are in all."""
    ids, total = s.graph_browse.node_memories(node_id, MEMORIES_SHOWN)
    docs = s.documents.get_many(ids)
    shown = [{"id": i, "text": _short(unmarked(docs[i].text), SNIPPET_CHARS), "archived": docs[i].archived}
             for i in ids if i in docs]
    return {"memories": shown, "memories_total": total}


def _ids(joined: str | None) -> list[int]:
    return sorted((int(x) for x in (joined or "").split(",") if x), reverse=True)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def personas_and_busiest(s, choose: bool, default: str = "") -> tuple[list[str], str]:
    """The personas with a graph, and (when the page must choose) the default persona's
    (memory.default_persona, '' for no persona: where memories that name none are) when it
    has one, else the one with the most memories: the graph a user most likely came to see.
    Each count stops at COUNT_CAP and only the first PERSONAS_COUNTED personas are counted, so
    opening the page never reads a whole table; a tie goes to the first in name order; ''
    (no persona) only when it is all there is."""
    personas = s.graph_browse.graph_personas(PERSONAS_SHOWN)
    if choose and default in personas:
        return personas, default
    named = [p for p in personas[:PERSONAS_COUNTED] if p]
    if not choose or not named:
        return personas, personas[0] if personas else ""
    counts = [(s.documents.list_by_state(DocumentFilter(persona_id=p), "all", 0, 0, COUNT_CAP)[1], p)
              for p in named]
    return personas, max(counts, key=lambda c: c[0])[1]


# -- the request ----------------------------------------------------------------------------


def _limit(request: Request, lang: str = "en") -> tuple[int, str | None]:
    raw = request.query_params.get("limit", "")
    if not raw:
        return NODE_CAP, None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_NODE_CAP:
        return NODE_CAP, translate(lang, "problem.limit", max=MAX_NODE_CAP, got=repr(raw[:40]))
    return value, None


def routes(ctx) -> list[Route]:
    async def page(request: Request):
        lang = language_of(request)
        chosen = request.query_params.get("persona")
        limit, problem = _limit(request, lang)
        status = 400 if problem else 200
        principal = principal_of(request)
        if principal.admin:
            personas, busiest = await ctx.reader.run(personas_and_busiest, chosen is None,
                                                     ctx.live.now.memory.default_persona)
            if chosen is None:
                chosen = busiest
        else:  # a user's own personas only, the default or the first unless one is asked for
            personas = sorted(principal.personas)
            try:
                chosen = view_persona(principal, chosen, ctx.live.now.memory.default_persona_id)
            except AccessDenied:
                problem, status = translate(lang, "access.persona_refused", persona=chosen,
                                            personas=principal.listed()), 403
                chosen = personas[0] if personas else ""
        return render(ctx, request, "graph.html", PAGE, status_code=status,
                      personas=personas, persona=chosen, limit=limit, problem=problem,
                      node_types=NODE_TYPES, self_name=SELF_CANONICAL,
                      edge_types=("describes", "co_occurs_with", "mentioned_in"))

    async def data(request: Request):
        limit, problem = _limit(request, language_of(request))
        if problem:
            return JSONResponse({"error": problem}, status_code=400)
        persona = request.query_params.get("persona", "")
        principal = principal_of(request)
        if not principal.admin:  # "" is the memories without a persona: the admin's
            try:
                persona = view_persona(principal, persona or None, ctx.live.now.memory.default_persona_id)
            except AccessDenied:
                return JSONResponse({"error": translate(language_of(request), "access.persona_refused",
                                                        persona=persona, personas=principal.listed())},
                                    status_code=403)
        return JSONResponse(await ctx.reader.run(graph_data, persona, limit))

    async def node(request: Request):
        node_id = request.path_params["node_id"]
        found = await ctx.reader.run(node_detail, node_id, principal_of(request))
        if found is None:
            return JSONResponse({"error": translate(language_of(request), "graph.node_missing", id=node_id)},
                                status_code=404)
        return JSONResponse(found)

    return [Route("/graph", page), Route("/api/graph", data),
            Route("/api/graph/node/{node_id:int}", node)]
