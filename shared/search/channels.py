"""The channels recall can use, by name: adding or removing one is one line here (plus its
own module). retrieval.channels chooses which run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from shared.config import GraphConfig, RetrievalConfig
from shared.search.bm25 import Bm25Channel
from shared.search.channel import Channel
from shared.search.graph import GraphKeywordChannel, GraphVectorChannel
from shared.search.vectors import VectorChannel, VectorIndexes
from shared.store.interface import Store


@dataclass(frozen=True)
class ChannelParts:
    """What channels are built from."""

    store: Store
    config: RetrievalConfig
    indexes: VectorIndexes
    graph: GraphConfig = field(default_factory=GraphConfig)  # aliases, for names in questions


BUILDERS: dict[str, Callable[[ChannelParts], Channel]] = {
    "bm25": lambda p: Bm25Channel(p.store, p.config.bm25_weight, p.config.bm25_context_weight),
    "vector": lambda p: VectorChannel(p.store, p.indexes.document, p.indexes.passage, p.config.vector_weight),
    "graph_keyword": lambda p: GraphKeywordChannel(p.store, p.config, p.graph.alias_map()),
    "graph_vector": lambda p: GraphVectorChannel(p.store, p.indexes.graph_entry, p.config.graph_vector_weight),
}


def build_channels(parts: ChannelParts) -> list[Channel]:
    """The channels retrieval.channels switches on, in the order it names them."""
    return [BUILDERS[name](parts) for name in parts.config.channels]
