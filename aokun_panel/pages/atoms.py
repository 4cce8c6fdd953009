"""Placeholder replaced by its owner in this change."""
from aokun_panel.pages import Page

PAGE = Page("/atoms", "Atoms")


def routes(ctx):
    return []
