"""Placeholder replaced by its owner in this change."""
from aokun_panel.pages import Page

PAGE = Page("/memories", "Memories")


def routes(ctx):
    return []
