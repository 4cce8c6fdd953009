"""Build the front: open the store, wire the channels, register the tools."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from mcp.server.mcpserver import MCPServer

from aokun_server.recall import Recaller
from aokun_server.tools import ToolDeps, register_tools
from shared import __version__
from shared.config import AppConfig
from shared.search.bm25 import Bm25Channel
from shared.store.db import Database
from shared.store.documents import DocumentStore
from shared.store.schema import open_database
from shared.text.segment import Segmenter

INSTRUCTIONS = (
    "Aokun is your long-term memory. Call memorize for anything worth keeping (facts about the "
    "user, decisions, plans, preferences); call recall before answering questions that may "
    "depend on earlier conversations. Pass persona_id to keep each user's memories apart."
)


class AokunMCPServer(MCPServer):
    """MCPServer that lists only the configured tools; the others stay callable."""

    def __init__(self, *args, exposed_tools: tuple[str, ...], **kwargs):
        super().__init__(*args, **kwargs)
        self._exposed = frozenset(exposed_tools)

    async def list_tools(self):
        return [tool for tool in await super().list_tools() if tool.name in self._exposed]


@dataclass
class Front:
    server: AokunMCPServer
    db: Database
    segmenter: Segmenter


def build_front(config: AppConfig) -> Front:
    """Open (and migrate) the database and return a ready MCP server."""
    db = open_database(config.storage)
    segmenter = Segmenter(config.text)
    # Loading jieba's dictionary takes about a second: do it now, off the request path.
    threading.Thread(target=segmenter.warm_up, name="jieba-warm-up", daemon=True).start()
    store = DocumentStore(db, segmenter)
    deps = ToolDeps(store=store, recaller=Recaller(store, Bm25Channel(store, segmenter)),
                    memory=config.memory, max_content_chars=config.server.max_content_chars)
    server = AokunMCPServer("aokun-memory", version=__version__, instructions=INSTRUCTIONS,
                            log_level=config.server.log_level,
                            exposed_tools=config.server.exposed_tools)
    register_tools(server, deps)
    return Front(server=server, db=db, segmenter=segmenter)
