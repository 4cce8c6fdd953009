"""Settings: every key of config.example.yaml with its description, default, running value and
an input that fits; saving writes the config file (shared/config_file.py) with the user's
comments kept, after the loader has accepted the result.

Which file: the one the panel's running config came from; a panel running on defaults (no
file found) saves to ./config.yaml in its working folder, created from config.example.yaml,
the file processes started in that folder read next. The panel only writes the file: every
process (this one too) applies the change through its config watcher (shared/live_config.py).
"""

from __future__ import annotations

import json
import time
from functools import cache, partial

import yaml
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aokun_panel.config_file import as_json, config_target, example_settings, save_settings
from aokun_panel.i18n import HERE as I18N_DIR
from aokun_panel.i18n import language_of, translate
from aokun_panel.render import Page, render
from shared.config import SECRET_KEYS
from shared.errors import ConfigError

PAGE = Page("/settings", "Settings")


def running_values(config, sections: dict) -> dict:
    """{section.key: value as JSON} of the running config, for every key the page lists."""
    return {s.key: as_json(getattr(getattr(config, section), s.key.split(".", 1)[1]))
            for section, settings in sections.items() for s in settings}


def shown(key: str, value, lang: str = "en") -> str:
    """A value as one line of text in the default / now columns."""
    if key in SECRET_KEYS:
        return translate(lang, "settings.set" if value else "settings.not_set")
    if isinstance(value, list):
        return ", ".join(value) if value else translate(lang, "settings.none")
    if isinstance(value, bool):
        return translate(lang, "settings.on" if value else "settings.off")
    return translate(lang, "settings.empty") if value == "" else str(value)


def waiting(live, lang: str = "en") -> dict:
    """{section.key: text of the saved value} for keys the file changed that this process
    applies only after a restart."""
    return {key: shown(key, as_json(new), lang) for key, (_, new) in live.pending_restart.items()}


def running_fronts(s, alive_since: float) -> list[dict]:
    """The fronts alive on this store, with the transport each serves: the panel runs no front,
    so what server.* says in its config is only the file's value; this is what runs."""
    return [{"pid": f.pid, "transport": f.kind} for f in s.runtime.live_fronts(alive_since)]


def routes(ctx) -> list[Route]:
    async def described() -> dict:
        # The first call parses config.example.yaml (about 0.1 s): off the event loop.
        return await run_in_threadpool(example_settings)

    async def page(request: Request):
        config = ctx.live.now
        lang = language_of(request)
        fronts = await ctx.reader.run(running_fronts, time.time() - config.worker.heartbeat_timeout_s)
        target = config_target(config)
        try:
            sections = await described()
        except ConfigError as exc:
            return render(ctx, request, "settings.html", PAGE, status_code=500, problem=str(exc),
                          sections={}, target=str(target), exists=target.is_file())
        return render(ctx, request, "settings.html", PAGE, sections=sections, fronts=fronts,
                      values=running_values(config, sections), shown=partial(shown, lang=lang),
                      secrets=SECRET_KEYS, waiting=waiting(ctx.live, lang), target=str(target),
                      exists=target.is_file(), description=partial(described_in, lang))

    async def current(request: Request):
        lang = language_of(request)
        values = running_values(ctx.live.now, await described())
        return JSONResponse({"values": values, "shown": {k: shown(k, v, lang) for k, v in values.items()},
                             "waiting": waiting(ctx.live, lang)})

    async def save(request: Request):
        try:
            changes = json.loads(await request.body())
        except ValueError:
            return JSONResponse({"error": translate(language_of(request), "settings.send_json")}, status_code=400)
        target = config_target(ctx.live.now)
        try:
            receipt = await run_in_threadpool(save_settings, target, changes)
        except ConfigError as exc:  # the loader's message; nothing was written
            return JSONResponse({"error": str(exc)}, status_code=400)
        except OSError as exc:
            return JSONResponse({"error": translate(language_of(request), "settings.cannot_write", file=target,
                                                    why=exc.strerror or exc)}, status_code=500)
        return JSONResponse({"file": str(receipt.path), "created": receipt.created,
                             "backup": str(receipt.backup) if receipt.backup else None,
                             "saved": list(receipt.saved), "live": receipt.live, "restart": receipt.restart})

    return [Route("/settings", page), Route("/api/settings", current),
            Route("/api/settings", save, methods=["POST"])]


def described_in(lang: str, key: str, english: str) -> str:
    """A setting's description (or, as `note.<key>`, the heading above it): the comment in
    config.example.yaml (English), or its translation in i18n/settings.<lang>.yaml."""
    return setting_descriptions(lang).get(key, english) if lang != "en" else english


@cache
def setting_descriptions(lang: str) -> dict[str, str]:
    """{section.key or note.section.key: description} in `lang` ({} when there is no file)."""
    path = I18N_DIR / f"settings.{lang}.yaml"
    if not path.is_file():
        return {}
    with open(path, encoding="utf-8") as handle:
        return {str(k): str(v) for k, v in (yaml.safe_load(handle) or {}).items()}
