"""Rendering a page: the shared layout's values, then the page's own."""

from __future__ import annotations

from starlette.requests import Request


def render(ctx, request: Request, template: str, page, status_code: int = 200, **values):
    from aokun_panel.pages import all_pages

    nav = [module.PAGE for module in all_pages()]
    return ctx.templates.TemplateResponse(
        request, template, {"page": page, "nav": nav, "csrf": ctx.csrf, **values},
        status_code=status_code)
