"""Rendering a page: the shared layout's values, then the page's own."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request


@dataclass(frozen=True)
class Page:
    """A page's place in the navigation: its path and title."""

    path: str
    title: str


def render(ctx, request: Request, template: str, page: Page, status_code: int = 200, **values):
    return ctx.templates.TemplateResponse(
        request, template, {"page": page, "nav": ctx.nav, "csrf": ctx.csrf, **values},
        status_code=status_code)
