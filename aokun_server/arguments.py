"""Rules every tool call passes before its arguments are validated, applied once by the
server (AokunMCPServer.call_tool) for every tool:

- a tool that is not listed (server.exposed_tools) cannot be called;
- an unknown argument is refused, naming it and the arguments the tool takes;
- a numeric string is read as a number where the schema says integer or number: the MCP
  Inspector CLI, among others, sends every argument as a string. Booleans are not numbers:
  true for k stays a type error (validation is strict);
- a persona_id or session_id of "null" or "none" is refused (memory_rules.check_scope_id)
  before the SDK reads the string as JSON, which would make it no persona at all.
"""

from __future__ import annotations

import re
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool

from shared.errors import InvalidInput
from shared.memory_rules import check_scope_id

_INTEGER = re.compile(r"[+-]?\d+")
_MAX_NUMBER_CHARS = 100  # longer is no number a tool takes (and int() would refuse 4,300 digits)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_SCOPE_IDS = frozenset({"persona_id", "session_id"})


def check_call(tool: Tool, arguments: dict[str, Any], exposed: frozenset[str]) -> dict[str, Any]:
    """The arguments to validate, numeric strings read as numbers; ToolError when the tool is
    not enabled or an argument is unknown."""
    if tool.name not in exposed:
        raise ToolError(f'tool "{tool.name}" is not enabled on this server (server.exposed_tools)')
    properties = tool.parameters.get("properties", {})
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        names = ", ".join(f'"{name}"' for name in unknown)
        takes = ", ".join(properties) or "no arguments"
        noun = "argument" if len(unknown) == 1 else "arguments"
        raise ToolError(f"unknown {noun} {names} ({tool.name} takes: {takes})")
    for name in _SCOPE_IDS.intersection(arguments):
        if isinstance(arguments[name], str):
            try:
                check_scope_id(name, arguments[name])
            except InvalidInput as exc:
                raise ToolError(str(exc)) from None
    return {name: _as_number(value, properties[name]) for name, value in arguments.items()}


def _as_number(value: Any, schema: dict) -> Any:
    if not isinstance(value, str) or len(value) > _MAX_NUMBER_CHARS:
        return value
    kinds = _types(schema)
    if "string" in kinds:
        return value
    if "integer" in kinds and _INTEGER.fullmatch(value):
        return int(value)
    if "number" in kinds and _NUMBER.fullmatch(value):
        return float(value)
    return value  # validation names what is wrong with it


def _types(schema: dict) -> set[str]:
    """The JSON types a property accepts (its own type, or its anyOf branches')."""
    kinds = schema.get("type")
    found = set(kinds) if isinstance(kinds, list) else {kinds} if kinds else set()
    for branch in schema.get("anyOf", ()):
        found |= _types(branch)
    return found
