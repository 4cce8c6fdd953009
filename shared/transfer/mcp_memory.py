"""The official MCP memory server's memory.jsonl as rows to memorize.

That server (modelcontextprotocol/servers, src/memory) keeps a knowledge graph as JSON lines:

    {"type": "entity", "name": "John_Smith", "entityType": "person", "observations": ["Speaks fluent Spanish"]}
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"}

- each observation becomes one memory, "John_Smith: Speaks fluent Spanish", with the entity as
  participant and its entity type as topic: the "Name: text" shape makes the atom and graph
  rules take the entity as the one the statement is about;
- each relation becomes one memory, "John_Smith works at Anthropic" (the relation type's
  underscores read as spaces), with both entities as participants and the sentence as its one
  key fact: the graph stage then makes a person node for each entity, a fact node for the
  relation, a `describes` edge from each entity to it and a `co_occurs_with` edge between them.

Names are kept as written, so an entity's observations and relations meet at one node. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeGuard

from shared.extract.entities import IMPORTED_KINDS, PERSON
from shared.transfer.rows import BadRow, Row, parse_json

TYPES = ("entity", "relation")


def read_rows(lines: Iterable[str], name: str) -> Iterator[Row | BadRow]:
    for number, raw in enumerate(lines, 1):
        if raw.strip():
            yield from _line_rows(raw, f"{name} line {number}")


def _line_rows(raw: str, where: str) -> Iterator[Row | BadRow]:
    try:
        item = parse_json(raw)
    except ValueError as exc:
        yield BadRow(where, str(exc))
        return
    if not isinstance(item, dict) or item.get("type") not in TYPES:
        kind = item.get("type") if isinstance(item, dict) else None
        yield BadRow(where, f"type must be entity or relation (got {kind!r:.40})")
        return
    if item["type"] == "entity":
        yield from _entity_rows(item, where)
    else:
        yield _relation_row(item, where)


def _entity_rows(item: dict, where: str) -> Iterator[Row | BadRow]:
    name, kind, observations = item.get("name"), item.get("entityType", ""), item.get("observations", [])
    if not _text(name):
        yield BadRow(where, "entity name must be a non-empty string")
        return
    if not isinstance(kind, str) or not isinstance(observations, list):
        yield BadRow(where, "entityType must be a string and observations a list of strings")
        return
    for index, observation in enumerate(observations):
        here = f"{where} observation {index + 1}"
        if not _text(observation):
            yield BadRow(here, "an observation must be a non-empty string")
            continue
        # The entity type is kept as a topic, which the graph reads as the entity's type
        # (shared/extract/entities.py IMPORTED_KINDS); only people are participants.
        metadata = {"participants": [name]} if IMPORTED_KINDS.get(kind.strip().lower(), PERSON) == PERSON else {}
        if kind.strip():
            metadata["topics"] = [kind]
        yield Row(where=here, content=f"{name}: {observation.strip()}", metadata=metadata,
                  source=f"mcp-memory entity\n{name}\n{observation}")


def _relation_row(item: dict, where: str) -> Row | BadRow:
    source, target, relation = item.get("from"), item.get("to"), item.get("relationType")
    if not (_text(source) and _text(target) and _text(relation)):
        return BadRow(where, "a relation needs from, to and relationType, each a non-empty string")
    sentence = f"{source} {relation.replace('_', ' ').strip()} {target}"
    return Row(where=where, content=sentence,
               metadata={"participants": [source, target], "key_facts": [sentence]},
               source=f"mcp-memory relation\n{source}\n{relation}\n{target}")


def _text(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value.strip())
