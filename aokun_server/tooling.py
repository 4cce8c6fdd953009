"""What every tool shares: how it is declared (`described`: title and hints, next to the
function) and registered (`register`: its dependencies bound, a compact text answer; a tool
written as `async def` stays one, so it runs on the event loop and chooses where its work
waits: tools/model_calls.py), how its
errors read, and the checks several tools make on their arguments (the search filters; what
a memory may hold is the memory service's rule, shared/memory_rules.py)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timezone, tzinfo
from typing import Annotated, Any, TypeVar, get_origin

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel

from shared.api.models import MAX_CONVERSATION_CHARS, MAX_CONVERSATION_TURNS, parse_iso, reject_lone_surrogates
from shared.errors import AokunError, InvalidInput
from shared.memory_rules import check_scope_id
from shared.store.model.documents import epoch
from shared.summarize.conversation import Turn, parse_conversation
from shared.summarize.transcripts import in_range
from shared.time_zone import in_zone
from shared.units import DAY

F = TypeVar("F", bound=Callable)


@dataclass(frozen=True)
class ToolSpec:
    """How a tool is shown to hosts: a human title and the behaviour hints (see `tool`)."""

    title: str
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


def described(title: str, **hints: bool) -> Callable[[F], F]:
    """Mark a tool function `fn(deps, **arguments)` with its title and hints; `register` reads
    them. The function stays a plain function, callable (and testable) as it is."""

    def mark(fn: F) -> F:
        # Our mark on the function object (functions declare no such attribute).
        fn.tool_spec = ToolSpec(title, **hints)  # pyright: ignore[reportFunctionMemberAccess]
        return fn

    return mark


def register(server: MCPServer, fn: Callable, deps: Any, **annotations: Any) -> None:
    """Add the tool function `fn(deps, **arguments)` to server with deps bound: its name,
    docstring and arguments (after deps) are the tool's; `annotations` replaces a
    parameter's type where it is built per server (recall's k, bounded by the config)."""
    spec: ToolSpec = fn.tool_spec  # pyright: ignore[reportFunctionMemberAccess]
    tool(server, spec.title, read_only=spec.read_only, destructive=spec.destructive,
         idempotent=spec.idempotent, open_world=spec.open_world)(
        translate_errors(bound(fn, deps, **annotations)))


def bound(fn: Callable, deps: Any, **annotations: Any) -> Callable:
    """fn with its first parameter (the dependencies) given, its signature the rest."""
    signature = inspect.signature(fn, eval_str=True)
    params = [p.replace(annotation=annotations[p.name]) if p.name in annotations else p
              for p in list(signature.parameters.values())[1:]]

    @functools.wraps(fn)
    async def call_async(*args, **kwargs):
        return await fn(deps, *args, **kwargs)

    @functools.wraps(fn)
    def call_sync(*args, **kwargs):
        return fn(deps, *args, **kwargs)

    call = call_async if inspect.iscoroutinefunction(fn) else call_sync

    call.__doc__ = listed_description(fn.__doc__ or "")
    # inspect.signature reads __signature__, which functions do not declare.
    call.__signature__ = signature.replace(parameters=params)  # pyright: ignore[reportAttributeAccessIssue]
    call.__annotations__ = {**{p.name: p.annotation for p in params},
                            "return": signature.return_annotation}
    return call


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
    async def wrapper_async(*args, **kwargs):
        return compact(await fn(*args, **kwargs))

    @functools.wraps(fn)
    def wrapper_sync(*args, **kwargs):
        return compact(fn(*args, **kwargs))

    wrapper = wrapper_async if inspect.iscoroutinefunction(fn) else wrapper_sync

    # inspect.signature reads __signature__ (undeclared on functions); the wrapper takes what fn
    # takes, which functools.wraps's type does not tell the checker.
    wrapper.__signature__ = signature.replace(  # pyright: ignore[reportAttributeAccessIssue]
        return_annotation=Annotated[CallToolResult, model])
    return wrapper  # pyright: ignore[reportReturnType]


def compact(result: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=result.model_dump_json(exclude_none=True))],
        structured_content=result.model_dump(mode="json", by_alias=True))


def listed_description(doc: str) -> str:
    """A tool function's docstring as the tool's description, without the indentation the
    source gives its lines (a model reads every character of tools/list): inspect.cleandoc
    removes their common indentation and the blank lines at either end."""
    return inspect.cleandoc(doc)


def translate_errors(fn: F) -> F:
    """Our own errors (AokunError: bad input, no such memory, storage...) become ToolError, so
    the caller reads their one-line message. Anything else is a bug: it goes on to the server
    (AokunMCPServer.call_tool), which logs it with its traceback and answers an internal error."""
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def waiter(*args, **kwargs):
            try:
                return await fn(*args, **kwargs)
            except AokunError as exc:
                raise ToolError(str(exc)) from exc

        return waiter  # pyright: ignore[reportReturnType] (functools.wraps's type is no F)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AokunError as exc:
            raise ToolError(str(exc)) from exc

    return wrapper  # pyright: ignore[reportReturnType] (functools.wraps's type is no F)


def checked_id(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    reject_lone_surrogates(name, value)
    if not value.strip():
        raise InvalidInput(f"{name} is empty; leave it out to search every {name.split('_')[0]}")
    return check_scope_id(name, value)


def time_bound(value: str | None, name: str, zone: tzinfo = timezone.utc) -> float | None:
    """An optional ISO-8601 bound as epoch seconds; a time without an offset is on the user's
    clock (zone)."""
    if value is None:
        return None
    reject_lone_surrogates(name, value)
    return epoch(in_zone(parse_iso(value, name), zone))


def day_end_bound(value: str | None, name: str, zone: tzinfo = timezone.utc) -> float | None:
    """An optional ISO-8601 end bound as epoch seconds: a date alone means the end of that day."""
    bound = time_bound(value, name, zone)
    if bound is not None and value is not None and "T" not in value.strip() and len(value.strip()) <= 10:
        bound += DAY
    return bound


def conversation_turns(conversation) -> list[Turn]:
    """summarize_memory's conversation as turns, within the size limits."""
    if isinstance(conversation, str) and len(conversation) > MAX_CONVERSATION_CHARS:
        raise InvalidInput(f"conversation is {len(conversation)} characters; the limit is "
                        f"{MAX_CONVERSATION_CHARS}: summarize it in parts")
    if isinstance(conversation, list) and len(conversation) > MAX_CONVERSATION_TURNS:
        raise InvalidInput(f"conversation has {len(conversation)} turns; the limit is "
                        f"{MAX_CONVERSATION_TURNS}: summarize it in parts")
    turns = parse_conversation(conversation)
    if sum(len(t.speaker) + len(t.text) for t in turns) > MAX_CONVERSATION_CHARS:
        raise InvalidInput(f"conversation holds more than {MAX_CONVERSATION_CHARS} characters: "
                        "summarize it in parts")
    for number, turn in enumerate(turns, 1):
        reject_lone_surrogates(f"conversation turn {number}", turn.speaker + turn.text)
    return in_range(turns, "conversation")
