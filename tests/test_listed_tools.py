"""Listed means callable: a tool left out of server.exposed_tools is neither listed nor
callable, through the official MCP client; and the size of tools/list, default against all."""

from __future__ import annotations

import json

import pytest

from helpers import front_in_process, write_config
from shared.config import ALL_TOOLS

DEFAULT = ["edit_memory", "list_memories", "memorize", "recall"]


def listed_chars(session) -> int:
    """The tools/list result as the client received it, in characters of compact JSON."""
    result = session._portal.call(session.client.list_tools)
    return len(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True),
                          ensure_ascii=False, separators=(",", ":")))


@pytest.fixture
def default(tmp_path):
    """A server with the default config: the four default tools listed."""
    with front_in_process(write_config(tmp_path)) as session:
        yield session


def test_an_unlisted_tool_is_refused_in_one_line(default):
    assert sorted(default.tool_names()) == DEFAULT
    for name in sorted(set(ALL_TOOLS) - set(DEFAULT)):
        assert default.error(name, {}) == \
            f'tool "{name}" is not enabled on this server (server.exposed_tools)'
    # Refused before its arguments are looked at, and an unknown name is still unknown.
    assert default.error("delete_memory", {"id": 1, "bogus": 2}) == \
        'tool "delete_memory" is not enabled on this server (server.exposed_tools)'
    assert default.error("no_such_tool") == "Unknown tool: no_such_tool"
    assert default.ok("memorize", {"content": "listed tools still work"})["status"] == "accepted"


def test_a_listed_tool_is_callable(tmp_path):
    config = write_config(tmp_path, server={"exposed_tools": ["memory_stats"]})
    with front_in_process(config) as s:
        assert s.tool_names() == ["memory_stats"]
        assert s.ok("memory_stats")["documents"]["total"] == 0
        assert s.error("memorize", {"content": "x"}) == \
            'tool "memorize" is not enabled on this server (server.exposed_tools)'


def test_tools_list_size(default, tmp_path):
    four = listed_chars(default)
    folder = tmp_path / "all"  # tmp_path holds the fixture's config
    folder.mkdir()
    config = write_config(folder, server={"exposed_tools": list(ALL_TOOLS)})
    with front_in_process(config) as s:
        everything = listed_chars(s)
    print(f"\ntools/list: {four} characters with the default four tools, "
          f"{everything} with all ten")
    assert four < everything


def schema_descriptions(schema) -> list[str]:
    """Every description in a JSON schema, nested ones included."""
    if isinstance(schema, dict):
        own = [schema["description"]] if isinstance(schema.get("description"), str) else []
        return own + [text for value in schema.values() for text in schema_descriptions(value)]
    if isinstance(schema, list):
        return [text for value in schema for text in schema_descriptions(value)]
    return []


def test_descriptions_carry_no_source_indentation(tmp_path):
    """A model reads every character of tools/list: no line of a tool's description (or of an
    argument's) starts with the indentation of the docstring it came from."""
    config = write_config(tmp_path, server={"exposed_tools": list(ALL_TOOLS)})
    with front_in_process(config) as s:
        tools = s._portal.call(s.client.list_tools).tools
    assert sorted(tool.name for tool in tools) == sorted(ALL_TOOLS)
    for tool in tools:
        texts = [tool.description, *schema_descriptions(tool.input_schema)]
        for text in texts:
            assert text == text.strip(), (tool.name, text[:80])
            indented = [line for line in text.split("\n") if line[:1].isspace()]
            assert not indented, (tool.name, indented[:3])
        assert "\n" in tool.description  # the line breaks stay: only the indentation goes
