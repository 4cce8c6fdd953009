"""Memories: search (the real recall, explained as score bars), a filtered list, and one memory
with its atoms, graph facts and stages; edit, pin and delete through the memory service, the
same calls the MCP tools make, so messages and receipts read the same: the service's rules
decide (an oversized edit is refused with memorize's message). Our own errors (AokunError)
are refused with their one-line message; anything else is a bug, logged with its traceback
and answered as an internal error (500)."""

from __future__ import annotations

import dataclasses
import logging
import time

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aokun_panel.access import principal_of
from aokun_panel.i18n import language_of, translate
from aokun_panel.pages.atoms import MAX_PAGE, atom_view, chains, link
from aokun_panel.render import Page, render
from aokun_panel.zones import zone_of
from shared.access import ADMIN, Principal, hides_memory, owned_memory, shown_personas, view_persona
from shared.api.models import MAX_INT64, MemoryMetadata, MemoryOut, parse_iso
from shared.api.validation import describe_validation_error
from shared.errors import AccessDenied, AokunError, InvalidInput, MemoryNotFound, StorageError
from shared.search.recall import RecallRequest
from shared.store.model.documents import LIST_STATES, DocumentFilter, epoch, unmarked
from shared.store.model.graph import NODE_TYPES

log = logging.getLogger("aokun.panel")

PAGE = Page("/memories", "Memories")
INTERNAL_ERROR = "internal error; see the panel's log"
PAGE_SIZE = 50
COUNT_CAP = 10_000     # a list counts its matches up to here ("10000+"): never a whole table
PERSONAS_SHOWN = 500


class EditArgs(BaseModel):
    """An edit as the panel sends it: the edit_memory tool's arguments, so a bad value is
    refused with the tool's own message ("metadata.importance: must be at most 1 ...")."""

    model_config = ConfigDict(extra="forbid", strict=True)
    content: str | None = None
    metadata: MemoryMetadata | None = None


# -- reads (on the reader's thread) ---------------------------------------------------------


def list_page(s, scope: DocumentFilter, state: str, offset: int, principal: Principal = ADMIN) -> dict:
    """scope.persona_id is already one the principal holds (or None for the admin's all)."""
    docs, total = s.documents.list_by_state(scope, state, PAGE_SIZE, offset, COUNT_CAP)
    return {"memories": docs, "total": total, "capped": total >= COUNT_CAP,
            "personas": shown_personas(principal, lambda: s.documents.persona_ids(PERSONAS_SHOWN))}


def memory_page(s, memory_id: int, now: float, lang: str = "en", principal: Principal = ADMIN) -> dict:
    """One memory with what was derived from it: atoms, graph entries and edges, stages. A
    memory of a persona the principal does not hold raises AccessDenied, read as missing."""
    doc = owned_memory(principal, memory_id, s.documents.get, lambda d: d.fields.persona_id)
    atom_rows = s.atoms.of_memory(memory_id)
    entries = s.graph_browse.entries_of_memory(memory_id)
    edges = s.graph_browse.edges_of_memory(memory_id)
    nodes = {}
    for e in edges:
        nodes[e["src_id"]] = (e["src_type"], e["src_value"])
        nodes[e["dst_id"]] = (e["dst_type"], e["dst_value"])
    for e in entries:
        if e["node_id"] is not None:
            nodes[e["node_id"]] = (e["node_type"], e["node_value"])
    return {"doc": doc, "atoms": [atom_view(r, now, _zone(doc), lang) for r in atom_rows],
            "chains": chains(s, atom_rows), "entries": entries, "edges": edges,
            "nodes": sorted(nodes.values(), key=lambda n: NODE_TYPES.index(n[0])),
            "stages": s.stages.of_memory(memory_id)}


# -- the request's filters -------------------------------------------------------------------


def read_filters(request: Request, lang: str = "en") -> tuple[dict, DocumentFilter, int, str | None]:
    """(filters as given, the DocumentFilter they make, offset, what was wrong or None)."""
    q = request.query_params
    filters = {key: q.get(key, "").strip() for key in ("q", "persona", "session", "since", "until")}
    filters["state"] = q.get("state") or "active"
    problem = None
    if filters["state"] not in LIST_STATES:
        problem = translate(lang, "problem.one_of", name="state", allowed=", ".join(LIST_STATES),
                            got=repr(filters["state"][:40]))
        filters["state"] = "active"
    bounds = {}
    for name in ("since", "until"):
        try:
            bounds[name] = _bound(filters[name], name)
        except InvalidInput as exc:
            problem, bounds[name] = str(exc), None
    if bounds["since"] is not None and bounds["until"] is not None and bounds["since"] > bounds["until"]:
        problem = translate(lang, "problem.since_after_until", since=filters["since"], until=filters["until"])
    try:
        page = min(max(1, int(q.get("page", "1"))), MAX_PAGE)
    except ValueError:
        page, problem = 1, translate(lang, "problem.page", got=repr(q.get("page", "")[:40]))
    scope = DocumentFilter(session_id=filters["session"] or None, persona_id=filters["persona"] or None,
                           include_archived=filters["state"] != "active",
                           since=bounds["since"], until=bounds["until"])
    return filters, scope, (page - 1) * PAGE_SIZE, problem


def _bound(value: str, name: str) -> float | None:
    """A since/until field as epoch seconds; a bare date for until means the end of that day."""
    if not value:
        return None
    moment = epoch(parse_iso(value, name))
    return moment + 86_399.999 if name == "until" and len(value) == 10 else moment


# -- routes -----------------------------------------------------------------------------------


def routes(ctx) -> list[Route]:
    async def memories(request: Request):
        lang = language_of(request)
        principal = principal_of(request)
        filters, scope, offset, problem = read_filters(request, lang)
        status = 400 if problem else 200
        try:  # a user's list is one of its personas at a time (the filter bounds one persona)
            persona = view_persona(principal, filters["persona"] or None, ctx.live.now.memory.default_persona_id)
        except AccessDenied:
            return _persona_refused(ctx, request, principal, filters)
        filters["persona"] = persona or ""
        scope = dataclasses.replace(scope, persona_id=persona)
        hits, search_error = None, None
        if filters["q"] and problem is None:
            try:  # the recaller (and its embedding model) is built on the first search
                # Searching here is looking, not using: no access is counted.
                asked = RecallRequest(filters["q"], ctx.live.now.memory.recall_top_k, scope, explain=True)
                hits = await run_in_threadpool(ctx.services.recaller.recall, asked)
                ctx.search_ready = True
            except AokunError as exc:
                search_error = str(exc)
        data = await ctx.reader.run(list_page, scope, filters["state"], offset, principal)
        seen = tuple(z for z in (zone_of(m.fields.original_time) for m in data["memories"]) if z)
        return render(ctx, request, "memories.html", PAGE, status_code=status,
                      seen_zones=tuple(dict.fromkeys(seen)), search_ready=ctx.search_ready,
                      intents=_intents(hits), filters=filters, problem=problem, hits=hits, search_error=search_error,
                      data=data, offset=offset, page_size=PAGE_SIZE, states=LIST_STATES,
                      channels=ctx.live.now.retrieval.channels,
                      link=lambda **changes: link(PAGE.path, filters, **changes))

    async def memory(request: Request):
        try:
            data = await ctx.reader.run(memory_page, _memory_id(request), time.time(), language_of(request),
                                        principal_of(request))
        except (MemoryNotFound, AccessDenied):  # another persona's memory reads as missing
            return render(ctx, request, "memory.html", PAGE, status_code=404, missing=request.path_params["memory_id"])
        own = zone_of(data["doc"].fields.original_time)
        return render(ctx, request, "memory.html", PAGE, data=data, missing=None, seen_zones=(own,) if own else (),
                      content=unmarked(data["doc"].text))

    async def ready(request: Request):
        """Whether a search has been answered yet: the first builds the recaller and loads the
        embedding model (seconds), so the page says so while it waits."""
        return JSONResponse({"ready": ctx.search_ready})

    async def edit(request: Request):
        try:
            args = EditArgs.model_validate(await request.json())
        except ValidationError as exc:
            return _refused(_describe(exc), 400)
        except ValueError:
            return _refused("the body must be JSON: {\"content\": ..., \"metadata\": {...}}", 400)
        return await _write(_edit, ctx, request, args)

    async def pin(request: Request):
        body = await _json(request)
        if not isinstance(body, dict) or not isinstance(body.get("pinned"), bool):
            return _refused("pinned must be true or false", 400)
        return await _write(_pin, ctx, request, body["pinned"])

    async def delete(request: Request):
        return await _write(_delete, ctx, request)

    return [Route("/memories", memories), Route("/memories/{memory_id:int}", memory),
            Route("/api/search/ready", ready),
            Route("/api/memories/{memory_id:int}", edit, methods=["POST"]),
            Route("/api/memories/{memory_id:int}", delete, methods=["DELETE"]),
            Route("/api/memories/{memory_id:int}/pin", pin, methods=["POST"])]


# -- writes: the memory service, off the event loop -----------------------------------------


def _edit(ctx, principal: Principal, memory_id: int, args: EditArgs) -> dict:
    changes = args.metadata.changes() if args.metadata is not None else {}
    doc = ctx.memories.edit(memory_id, args.content, changes, principal=principal)
    return {"id": doc.id, "status": "updated", "memory": MemoryOut.of(doc).model_dump()}


def _pin(ctx, principal: Principal, memory_id: int, pinned: bool) -> dict:
    doc = ctx.memories.set_pinned(memory_id, pinned, principal=principal)
    return {"id": doc.id, "pinned": doc.fields.pinned}


def _delete(ctx, principal: Principal, memory_id: int) -> dict:
    receipt = ctx.memories.delete(memory_id, principal=principal)
    return {"id": memory_id, "status": "deleted", "removed": dict(receipt),
            "backups_holding": receipt.backups_holding}


def _memory_id(request: Request) -> int:
    """The memory id in the path; one SQLite cannot hold is no memory."""
    memory_id = request.path_params["memory_id"]
    if memory_id > MAX_INT64:
        raise MemoryNotFound(memory_id)
    return memory_id


async def _write(fn, ctx, request: Request, *args) -> JSONResponse:
    """Run a write on the request's memory in a thread; our errors become one-line JSON
    refusals, anything else (a bug) is logged and answered as an internal error."""
    try:
        return JSONResponse(await run_in_threadpool(fn, ctx, principal_of(request), _memory_id(request), *args))
    except MemoryNotFound as exc:
        return _refused(str(exc), 404)
    except AccessDenied as exc:
        # Another persona's memory, or moving one to a persona not held: as if missing, in
        # the access rules' words (they name only this token's personas).
        return _refused(str(exc), 404 if hides_memory(exc) else 403)
    except StorageError as exc:
        return _refused(str(exc), 503)
    except AokunError as exc:
        return _refused(str(exc), 400)
    except Exception:
        log.exception("%s %s failed (a bug)", request.method, request.url.path)
        return _refused(INTERNAL_ERROR, 500)


def _persona_refused(ctx, request: Request, principal: Principal, filters: dict):
    """A list asked for a persona the token does not hold: refused, showing nothing of it."""
    problem = translate(language_of(request), "access.persona_refused", persona=filters["persona"],
                        personas=principal.listed())
    empty = {"memories": [], "total": 0, "capped": False, "personas": sorted(principal.personas)}
    return render(ctx, request, "memories.html", PAGE, status_code=403, search_ready=ctx.search_ready,
                  intents=[], filters=filters, problem=problem, hits=None, search_error=None, data=empty,
                  offset=0, page_size=PAGE_SIZE, states=LIST_STATES, channels=ctx.live.now.retrieval.channels,
                  link=lambda **changes: link(PAGE.path, filters, **changes))


def _describe(exc: ValidationError) -> str:
    return describe_validation_error(exc, EditArgs)


async def _json(request: Request):
    try:
        return await request.json()
    except ValueError:
        return None


def _refused(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _zone(doc):
    """The memory's own clock (a plan's deadline reads in it, as on the atoms page)."""
    return doc.fields.original_time.tzinfo if doc is not None and doc.fields.original_time else None


def _intents(hits) -> list[str]:
    """The query's intents (recall classifies the query, so every hit carries the same)."""
    for hit in hits or ():
        return list(hit.explain.get("parts", {}).get("routes", {}).get("intents") or [])
    return []
