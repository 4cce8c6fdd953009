"""The panel's pages. Each module has PAGE (its path, title and place in the navigation) and
routes(ctx) -> list of Starlette routes; adding a page is one module and one entry in PAGES."""

from __future__ import annotations

from aokun_panel.pages import atoms, forgetting, graph, memories, overview, queue, settings

# In navigation order.
PAGES = (overview, settings, memories, atoms, graph, queue, forgetting)
