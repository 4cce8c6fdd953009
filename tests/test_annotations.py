"""Every tool carries a human title, the MCP behaviour hints and a description saying when to
call it, as the official client reads them from tools/list of the real front (built in this process)."""

from __future__ import annotations

import re

from helpers import front_in_process, write_config
from shared.config import ALL_TOOLS

# name: (title, readOnly, destructive, idempotent, openWorld)
EXPECTED = {
    "memorize": ("Remember", False, False, False, False),
    "summarize_memory": ("Summarize a conversation into a memory", False, False, False, True),
    "recall": ("Recall memories", True, False, True, False),
    "list_memories": ("List memories", True, False, True, False),
    "edit_memory": ("Edit a memory", False, True, True, False),
    "delete_memory": ("Delete a memory", False, True, True, False),
    "pin_memory": ("Pin or unpin a memory", False, False, True, False),
    "memory_stats": ("Memory statistics", True, False, True, False),
    "search_atoms": ("Search facts and plans", True, False, True, False),
    "memory_maintenance": ("Run memory upkeep", False, True, False, False),
}


def test_every_tool_has_a_title_hints_and_says_when_to_call_it(tmp_path):
    assert set(EXPECTED) == set(ALL_TOOLS)
    config = write_config(tmp_path, server={"exposed_tools": list(ALL_TOOLS)})
    with front_in_process(config) as session:
        tools = {t.name: t for t in session._portal.call(session.client.list_tools).tools}
    assert set(tools) == set(EXPECTED)
    for name, (title, read_only, destructive, idempotent, open_world) in EXPECTED.items():
        tool, hints = tools[name], tools[name].annotations
        assert tool.title == title and hints.title == title, name
        got = (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint)
        assert got == (read_only, destructive, idempotent, open_world), name
        assert re.search(r"\b[Cc]all\s+it\b", tool.description), f"{name} does not say when to call it"


def test_hints_travel_as_the_protocol_names_them(tmp_path):
    """On the wire the hints are camelCase (readOnlyHint, ...), as hosts read them."""
    config = write_config(tmp_path, server={"exposed_tools": ["recall", "delete_memory"]})
    with front_in_process(config) as session:
        tools = {t.name: t for t in session._portal.call(session.client.list_tools).tools}
    wire = {name: t.model_dump(by_alias=True, exclude_none=True)["annotations"] for name, t in tools.items()}
    assert wire["recall"]["readOnlyHint"] is True
    assert wire["delete_memory"]["destructiveHint"] is True and wire["delete_memory"]["idempotentHint"] is True
