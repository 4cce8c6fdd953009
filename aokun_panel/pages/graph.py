"""Placeholder replaced by its owner in this change."""
from aokun_panel.pages import Page

PAGE = Page("/graph", "Graph")


def routes(ctx):
    return []
