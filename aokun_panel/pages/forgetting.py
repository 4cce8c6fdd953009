"""Placeholder replaced by its owner in this change."""
from aokun_panel.pages import Page

PAGE = Page("/forgetting", "Forgetting")


def routes(ctx):
    return []
