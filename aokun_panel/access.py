"""Who the panel is serving, and which routes a user may open.

The gate (security.py) finds each request's principal from its token (shared/access.py's
resolve_token, looked up on every request so a revoke applies at once) and leaves it in the
request's state; the pages scope what they read and write by it through shared/access.py.

Every route must be named here, as the admin's (whole-store figures, upkeep, settings) or as
one the pages scope themselves: a route named in neither stops the panel at start, so a new
route cannot slip out unguarded.
"""

from __future__ import annotations

from functools import wraps

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse
from starlette.routing import Mount, Route

from aokun_panel.i18n import language_of, translate
from shared.access import ADMIN, Principal

# Whole-store figures, the pipeline's upkeep and the configuration: the admin's only.
ADMIN_ROUTES = frozenset({
    "/", "/api/overview",
    "/settings", "/api/settings",
    "/queue", "/api/queue", "/api/queue/missing", "/api/queue/retry-failed", "/api/queue/redo-missing",
    "/forgetting", "/api/forgetting/curve", "/api/forgetting/atoms",
    "/api/atoms/counts",
})
# Routes that read nothing of any persona: whether the embedding model is loaded yet.
PERSONA_FREE_ROUTES = frozenset({"/api/search/ready"})
# Routes whose handlers bound every read and write to the principal's personas.
SCOPED_ROUTES = PERSONA_FREE_ROUTES | frozenset({
    "/memories", "/memories/{memory_id:int}",
    "/api/memories/{memory_id:int}", "/api/memories/{memory_id:int}/pin",
    "/atoms", "/graph", "/api/graph", "/api/graph/node/{node_id:int}",
})
# The pages a user lands on and sees in the navigation.
USER_HOME = "/memories"


def principal_of(request: Request) -> Principal:
    """The request's principal, as the gate set it. A request the gate did not mark (an app
    built without one, in-process tests) is the admin's: every persona, as on a store without users."""
    return getattr(request.state, "principal", ADMIN)


def csrf_of(request: Request, fallback: str) -> str:
    return getattr(request.state, "csrf", fallback)


def admin_page(path: str) -> bool:
    return path in ADMIN_ROUTES


def guarded(routes: list, refusal_page) -> list:
    """The routes with the admin's wrapped so that a user is refused; an unnamed route raises."""
    out = []
    for route in routes:
        if isinstance(route, Mount):  # static files: no persona's data
            out.append(route)
            continue
        if route.path in SCOPED_ROUTES:
            out.append(route)
        elif route.path in ADMIN_ROUTES:
            methods = sorted(route.methods - {"HEAD"}) if route.methods else None
            out.append(Route(route.path, _admin_only(route.endpoint, refusal_page), methods=methods,
                             name=route.name))
        else:
            raise RuntimeError(f"panel route {route.path} has no access rule: name it in aokun_panel/access.py")
    return out


def _admin_only(endpoint, refusal_page):
    @wraps(endpoint)
    async def handler(request: Request):
        if principal_of(request).admin:
            return await endpoint(request)
        if request.url.path == "/" and request.method in ("GET", "HEAD"):
            return RedirectResponse(USER_HOME, status_code=303)  # a user's start page
        message = translate(language_of(request), "access.admin_only")
        if request.url.path.startswith("/api/") or request.method not in ("GET", "HEAD"):
            return JSONResponse({"error": message}, status_code=403)
        return refusal_page(request, message)
    return handler
