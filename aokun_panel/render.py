"""Rendering a page: the shared layout's values (language, time zone, navigation), then the
page's own."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from starlette.requests import Request

from aokun_panel import words, zones
from aokun_panel.access import admin_page, csrf_of, principal_of
from aokun_panel.i18n import js_strings, language_of, translate
from shared.time_zone import UTC_NAME


@dataclass(frozen=True)
class Page:
    """A page's place in the navigation: its path and title. The title is English and stays
    the page's id (data-page, tests); what is shown is its translation, `nav.<id>`."""

    path: str
    title: str

    @property
    def key(self) -> str:
        return f"nav.{self.title.lower()}"


def render(ctx, request: Request, template: str, page: Page, status_code: int = 200,
           seen_zones: tuple[str, ...] = (), **values):
    """The template with the layout's values. `seen_zones`: the zones of the times this page
    shows (offered by the zone switch beside UTC, the browser's and the chosen one)."""
    lang = language_of(request)
    principal = principal_of(request)
    # A user's navigation leaves out the admin's pages (they would only say "admin only").
    nav = ctx.nav if principal.admin else [p for p in ctx.nav if not admin_page(p.path)]
    zone = zones.chosen(request.cookies, ctx.live.now.memory.time_zone)
    offered = [UTC_NAME, zone.name, zones.browser(request.cookies), *seen_zones]
    return ctx.templates.TemplateResponse(
        request, template,
        {"page": page, "nav": nav, "csrf": csrf_of(request, ctx.csrf), "admin": principal.admin, "lang": lang,
         "t": partial(translate, lang),
         "zone": zone, "when": zone.when, "zone_choices": list(dict.fromkeys(z for z in offered if z)),
         "browser_zone": zones.browser(request.cookies), "age": partial(words.age, lang),
         "js_strings": js_strings(lang), **values},
        status_code=status_code)
