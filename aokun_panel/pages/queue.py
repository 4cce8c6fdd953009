"""Queue: how long until every memory is searchable by meaning (per stage: waiting, pace, time
left), stages in trouble (failed, stuck, retrying) with their errors, the workers and fronts
alive, and the repair buttons (the `aokun repair --apply` path, through the memory service)."""

from __future__ import annotations

import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aokun_panel import words
from aokun_panel.i18n import language_of
from aokun_panel.pages.overview import with_warnings
from aokun_panel.render import Page, render
from shared.catch_up import read_catch_up
from shared.embedders import build_embedder, recorded_models
from shared.errors import AokunError

PAGE = Page("/queue", "Queue")
LISTED = 100  # rows per table; the counts above them are exact


def queue_view(s, heartbeat_timeout_s: float, now: float) -> dict:
    """Everything the queue page shows, in one read session (on the reader's thread)."""
    alive_since = now - heartbeat_timeout_s
    figures = s.stages.queue_figures(now)
    workers = [row for row in s.runtime.worker_rows() if row.alive(alive_since)]
    return {
        "queue": figures,
        "problems": s.stages.stage_problems(now, LISTED),
        "retrying": s.stages.retrying_stages(now, LISTED),
        "workers": [{"pid": w.pid, "host": w.hostname, "autostarted": w.kind == "autostarted",
                     "heartbeat_age_s": round(now - w.heartbeat_time, 1),
                     "up_s": round(now - w.started_time, 1)} for w in workers],
        "fronts": [{"pid": f.pid, "host": f.hostname, "transport": f.kind,
                    "heartbeat_age_s": round(now - f.heartbeat_time, 1)}
                   for f in s.runtime.live_fronts(alive_since)],
        "newest_heartbeat": s.runtime.newest_heartbeat(), "now": now,
        "catch_up": read_catch_up(s, now, heartbeat_timeout_s).as_dict(),
    }


def configured_model(config, s) -> str:
    """The name of the configured vector space, as the store's worker resolves it (the local
    models load only on first use, so naming it loads nothing)."""
    return build_embedder(config.embedding, threads=1, recorded=recorded_models(s)).model


def missing_summary(missing: dict[str, list[int]]) -> dict:
    return {name: {"count": len(ids), "examples": ids[:10]} for name, ids in missing.items() if ids}


def refused(exc: AokunError) -> JSONResponse:
    """A store or config failure as the one line the page shows (409: nothing was changed)."""
    return JSONResponse({"error": str(exc)}, status_code=409)


def routes(ctx) -> list[Route]:
    async def view(request: Request) -> dict:
        found = await ctx.reader.run(queue_view, ctx.live.now.worker.heartbeat_timeout_s, time.time())
        lang = language_of(request)
        return {**with_warnings(found, lang), "catch_up_texts": words.catch_up(lang, found["catch_up"])}

    async def find_missing() -> dict[str, list[int]]:
        return await ctx.reader.run(
            lambda s: s.consistency.missing_outputs(configured_model(ctx.live.now, s)))

    async def page(request: Request):
        return render(ctx, request, "queue.html", PAGE, data=await view(request))

    async def data(request: Request):
        return JSONResponse(await view(request))

    async def missing(request: Request):
        """The doctor's check for derived rows a done stage should have made (a full scan:
        run on demand, not on every refresh)."""
        try:
            return JSONResponse({"missing": missing_summary(await find_missing())})
        except AokunError as exc:
            return refused(exc)

    async def retry_failed(request: Request):
        """aokun repair --apply, failed half: fresh attempts, queued for the workers."""
        try:
            return JSONResponse({"retried": await run_in_threadpool(ctx.memories.retry_failed)})
        except AokunError as exc:
            return refused(exc)

    async def redo_missing(request: Request):
        """aokun repair --apply, missing half: found again here (never trusting ids from the
        page), then the stages that make them run again."""
        try:
            found = await find_missing()
            redone = await run_in_threadpool(ctx.memories.redo_missing, found)
        except AokunError as exc:
            return refused(exc)
        return JSONResponse({"redone": redone, "missing": missing_summary(found)})

    return [Route("/queue", page), Route("/api/queue", data),
            Route("/api/queue/missing", missing),
            Route("/api/queue/retry-failed", retry_failed, methods=["POST"]),
            Route("/api/queue/redo-missing", redo_missing, methods=["POST"])]
