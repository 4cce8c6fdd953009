"""What every tool shares: how it is registered (title, hints, a compact text answer), how
its errors read, and the checks several tools make on their arguments."""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Callable, TypeVar, get_origin

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ValidationError

from aokun_server.models import (MAX_CONVERSATION_CHARS, MAX_CONVERSATION_TURNS, parse_iso,
                                 reject_lone_surrogates)
from shared.errors import AokunError
from shared.store.documents import epoch
from shared.summarize.conversation import Turn, parse_conversation

F = TypeVar("F", bound=Callable)


def tool(server: MCPServer, title: str, *, read_only: bool = False, destructive: bool = False,
         idempotent: bool = False, open_world: bool = False):
    """server.tool() with a human title and the behaviour hints hosts use to decide which calls
    to confirm with the user. Every hint is given, so no host falls back to the protocol's
    defaults (which assume a destructive, open-world tool). The text content of the answer is
    compact (answered)."""
    register = server.tool(title=title, annotations=ToolAnnotations(
        title=title, read_only_hint=read_only, destructive_hint=destructive,
        idempotent_hint=idempotent or read_only, open_world_hint=open_world))

    def decorate(fn: F) -> F:
        register(answered(fn))
        return fn

    return decorate


def answered(fn: F) -> F:
    """The tool returning its result model with that model, every field, as structured
    content and as text one line of JSON without nulls (the SDK's text is indented JSON with
    every null). A tool declared `-> Annotated[CallToolResult, Model]` writes its own text."""
    signature = inspect.signature(fn, eval_str=True)
    model = signature.return_annotation
    if get_origin(model) is Annotated:
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return compact(fn(*args, **kwargs))

    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
        return_annotation=Annotated[CallToolResult, model])
    return wrapper  # type: ignore[return-value]


def compact(result: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=result.model_dump_json(exclude_none=True))],
        structured_content=result.model_dump(mode="json", by_alias=True))


def translate_errors(fn: F) -> F:
    """Turn our own errors into ToolError so the caller reads the message, not a crash."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AokunError as exc:
            raise ToolError(str(exc)) from exc
        except ValidationError:
            raise  # a result that does not fit its model is our bug, not the caller's input
        except ValueError as exc:
            raise ToolError(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def checked_content(content: str, limit: int) -> str:
    reject_lone_surrogates("content", content)
    if not content.strip():
        raise ToolError("content is empty: give the text to remember")
    if len(content) > limit:
        raise ToolError(f"content is {len(content)} characters; the limit is {limit} "
                        "(server.max_content_chars)")
    return content


def checked_id(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    reject_lone_surrogates(name, value)
    if not value.strip():
        raise ToolError(f"{name} is empty; leave it out to search every {name.split('_')[0]}")
    return value


def time_bound(value: str | None, name: str) -> float | None:
    """An optional ISO-8601 bound as epoch seconds (naive times are UTC)."""
    if value is None:
        return None
    reject_lone_surrogates(name, value)
    return epoch(parse_iso(value, name))


def conversation_turns(conversation) -> list[Turn]:
    """summarize_memory's conversation as turns, within the size limits."""
    if isinstance(conversation, str) and len(conversation) > MAX_CONVERSATION_CHARS:
        raise ToolError(f"conversation is {len(conversation)} characters; the limit is "
                        f"{MAX_CONVERSATION_CHARS}: summarize it in parts")
    if isinstance(conversation, list) and len(conversation) > MAX_CONVERSATION_TURNS:
        raise ToolError(f"conversation has {len(conversation)} turns; the limit is "
                        f"{MAX_CONVERSATION_TURNS}: summarize it in parts")
    turns = parse_conversation(conversation)
    if sum(len(t.speaker) + len(t.text) for t in turns) > MAX_CONVERSATION_CHARS:
        raise ToolError(f"conversation holds more than {MAX_CONVERSATION_CHARS} characters: "
                        "summarize it in parts")
    for number, turn in enumerate(turns, 1):
        reject_lone_surrogates(f"conversation turn {number}", turn.speaker + turn.text)
    return turns
