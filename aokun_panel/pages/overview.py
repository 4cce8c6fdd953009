"""Overview: what is stored, what is waiting, who is working; refreshes by itself."""

from __future__ import annotations

import os
import time

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aokun_panel import words
from aokun_panel.i18n import language_of
from aokun_panel.render import Page, render
from shared.store.backup import latest_backup

PAGE = Page("/", "Overview")


def figures(s, config, now: float) -> dict:
    """Everything the overview shows, in one read session (on the reader's thread)."""
    alive_since = now - config.worker.heartbeat_timeout_s
    queue = s.stages.queue_figures(now)
    workers = [row for row in s.runtime.worker_rows() if row.alive(alive_since)]
    newest = s.runtime.newest_heartbeat()
    counts = s.documents.stats()
    by_type: dict[str, dict[str, int]] = {}
    for atom_type, state, count in s.atoms.counts_by_type_and_state():
        by_type.setdefault(atom_type, {})[state] = count
    return {
        "documents": counts,
        "atoms": by_type,
        "graph": s.graph.table_counts(),
        "vectors": [{"kind": k, "model": m, "dim": d, "count": c} for k, m, d, c in s.vectors.space_figures()],
        "queue": queue,
        "workers": [{"pid": w.pid, "host": w.hostname, "kind": w.kind,
                     "heartbeat_age_s": round(now - w.heartbeat_time, 1)} for w in workers],
        "fronts": [{"pid": f.pid, "host": f.hostname, "heartbeat_age_s": round(now - f.heartbeat_time, 1)}
                   for f in s.runtime.live_fronts(alive_since)],
        "newest_heartbeat": newest, "now": now,
    }


def with_warnings(data: dict, lang: str) -> dict:
    """The figures with the pipeline's warnings in the page's language."""
    return {**data, "warnings": words.pipeline_warnings(lang, data["queue"], len(data["workers"]),
                                                        data["newest_heartbeat"], data["now"])}


def _files(config) -> dict:
    path = config.storage.db_path
    size = sum(os.path.getsize(p) for p in (path, path.with_name(path.name + "-wal")) if p.exists())
    latest = latest_backup(config.backup.dir or config.storage.data_dir / "backups")
    return {"database_bytes": size, "last_backup": latest}


def routes(ctx) -> list[Route]:
    async def page(request: Request):
        data = with_warnings(await ctx.reader.run(figures, ctx.live.now, time.time()), language_of(request))
        return render(ctx, request, "overview.html", PAGE, data=data, files=_files(ctx.live.now))

    async def data(request: Request):
        data = with_warnings(await ctx.reader.run(figures, ctx.live.now, time.time()), language_of(request))
        return JSONResponse({**data, "files": _files(ctx.live.now)})

    return [Route("/", page), Route("/api/overview", data)]
