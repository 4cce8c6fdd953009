"""YAML read safely: yaml.safe_load, refusing documents that expand far beyond their text.

safe_load builds no Python objects from tags, but it does expand aliases: a 1 KB document of
nested aliases (`l1: &l1 [*l0, *l0, ...]` ... `title: *l8`) stands for billions of nodes,
and turning one into a string takes gigabytes. Neither a config file nor a note's front
matter needs more than a few aliases, so a document is refused (YamlRefused, a
yaml.YAMLError) when it uses more than MAX_ALIASES of them or when the tree it stands for,
aliases expanded, has more than MAX_NODES nodes. Both are checked on the composed node graph,
before any object is built. The caller names the file in its one-line message.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_ALIASES = 20
MAX_NODES = 100_000


class YamlRefused(yaml.YAMLError):
    """A document refused for the size it would expand to."""


class _Loader(yaml.SafeLoader):
    def __init__(self, stream):
        super().__init__(stream)
        self._aliases = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise YamlRefused(f"uses more than {MAX_ALIASES} YAML aliases (*name); "
                                  "write the values out instead")
        return super().compose_node(parent, index)


def safe_load(text: str) -> Any:
    """The document's value, as yaml.safe_load gives it; YamlRefused when it uses too many
    aliases or expands to too many nodes, yaml.YAMLError when it is no valid YAML."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node)
        return loader.construct_document(node)
    except RecursionError:
        raise YamlRefused("nested too deeply (lists or mappings inside one another)") from None
    finally:
        loader.dispose()


def _check_size(root) -> None:
    """Count the nodes of the expanded tree (an aliased node counts each time it is used),
    memoised per node, so the count itself costs one visit per distinct node."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()

    def size(node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in visiting:  # a recursive alias (&a [*a]): infinite once expanded
            raise YamlRefused("a YAML alias refers to itself: its value would be endless")
        visiting.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = []
        for child in children:
            total += size(child)
            if total > MAX_NODES:
                raise YamlRefused(f"expands to more than {MAX_NODES:,} values once its YAML "
                                  "aliases (*name) are filled in; write the values out instead")
        visiting.discard(key)
        sizes[key] = total
        return total

    size(root)
