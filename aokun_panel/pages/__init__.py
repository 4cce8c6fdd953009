"""The panel's pages. Each module has PAGE (its path, title and place in the navigation) and
routes(ctx) -> list of Starlette routes; adding a page is one module and one line in PAGES."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    path: str
    title: str


def all_pages():
    """The page modules, in navigation order (imported here so importing this is cheap)."""
    from aokun_panel.pages import atoms, forgetting, graph, memories, overview, queue, settings

    return [overview, settings, memories, atoms, graph, queue, forgetting]
