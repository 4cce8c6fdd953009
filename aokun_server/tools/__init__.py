"""The MCP tools. Each is a top-level function `tool(deps, **arguments)` in its module —
writing.py (memorize, summarize_memory, edit_memory, delete_memory, pin_memory), searching.py
(recall, search_atoms, list_memories), operating.py (memory_maintenance, memory_stats) — that
takes its dependencies explicitly (ToolDeps) and its arguments validated by the SDK against
their types (aokun_server/params.py), and can be called and tested alone. register_tools only
registers them.

Tools are plain `def`s: the SDK runs them in worker threads, and each thread has its own
SQLite connection, so a slow write never blocks the event loop. The one exception,
summarize_memory, is an `async def` that sends work which may wait on a chat model to a
bounded pool of its own (tools/model_calls.py), so a model that never answers cannot take
the threads memorize and recall need. Every write goes through the
memory service (shared/memories.py), like every other entry point, and its rules decide what
a memory may hold.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from aokun_server.params import k_param
from aokun_server.tooling import register
from aokun_server.tools import operating, searching, writing
from aokun_server.tools.deps import ToolDeps

__all__ = ["TOOLS", "ToolDeps", "register_tools"]

# In the order they are listed.
TOOLS = (writing.memorize, writing.summarize_memory, writing.edit_memory, writing.delete_memory,
         writing.pin_memory, searching.recall, searching.search_atoms, searching.list_memories,
         operating.memory_maintenance, operating.memory_stats)


def register_tools(server: MCPServer, deps: ToolDeps) -> None:
    """Add every Aokun tool to server. The docstrings are the descriptions a model reads to
    decide when to call each tool, and each parameter's type (aokun_server/params.py) carries
    its own; keep them true to the code. k's type is built here: its bound is the configured
    memory.recall_max_k (shown at start, checked live at each call)."""
    live = deps.live
    k = k_param(live)
    for fn in TOOLS:
        per_server = {"k": k} if fn in searching.WITH_K else {}
        register(server, fn, deps, **per_server)
