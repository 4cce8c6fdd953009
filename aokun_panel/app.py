"""The panel's Starlette app: the gate, the pages' routes, static files, and the services' life."""

from __future__ import annotations

import contextlib
from pathlib import Path

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from aokun_panel.access import guarded
from aokun_panel.context import PanelContext
from aokun_panel.pages import PAGES
from aokun_panel.reader import Reader
from aokun_panel.render import render
from aokun_panel.security import PanelGate, csrf_token
from aokun_panel.timing import ServerTiming
from shared.access import resolve_token
from shared.assembly import open_services
from shared.live_config import LiveConfig, follow_log_level
from shared.store.model.documents import unmarked

HERE = Path(__file__).resolve().parent


def build_context(live: LiveConfig, token: str) -> PanelContext:
    services = open_services(live)
    follow_log_level(live)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    # A memory's text without its "[2024-05-08 21:56]" marker: that is the time on its own
    # clock, and the pages show every time in the one chosen zone instead.
    templates.env.filters["unmarked"] = unmarked
    return PanelContext(services=services, reader=Reader(services.store), templates=templates,
                        csrf=csrf_token(token), nav=[module.PAGE for module in PAGES])


def build_app(ctx: PanelContext, token: str, port: int):
    """The ASGI app: every request through the gate first."""

    @contextlib.asynccontextmanager
    async def lifespan(app):
        watcher = ctx.live.watch()  # settings saved anywhere apply here too
        try:
            yield
        finally:
            if watcher is not None:
                watcher.stop()
            ctx.services.close()

    def refusal(module):
        return lambda request, message: render(ctx, request, "refused.html", module.PAGE,
                                               status_code=403, message=message)

    routes = [route for module in PAGES for route in guarded(module.routes(ctx), refusal(module))]
    routes.append(Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"))
    app = Starlette(routes=routes, lifespan=lifespan)

    def resolve(given: str):
        """server.token (a restart key) and users' tokens, looked up on every request: a
        revoke applies at once."""
        return resolve_token(ctx.store, given, ctx.live.at_start.server.token)

    return ServerTiming(PanelGate(app, token, port, resolve, ctx.live))
