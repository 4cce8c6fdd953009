"""One line for a request that does not fit the API schema (a pydantic ValidationError): which
field, what was expected, what was given, never pydantic's boilerplate or documentation URLs.
The MCP front answers tool calls with it and the panel its forms, so both read the same."""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

MAX_MESSAGE_CHARS = 1000
MAX_SHOWN_ERRORS = 5
_SHOWN_INPUT_CHARS = 60

_SIMPLE = {
    "missing": "is required",
    "int_type": "must be an integer", "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be true or false", "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "string_unicode": "holds an invalid character (a lone UTF-16 surrogate)",
    "float_type": "must be a number", "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "list_type": "must be a list",
    "dict_type": "must be an object", "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}
_BOUNDS = {"greater_than_equal": ("ge", "at least"), "greater_than": ("gt", "more than"),
           "less_than_equal": ("le", "at most"), "less_than": ("lt", "less than")}



def one_line(text: str) -> str:
    text = re.sub(r"\s*[\r\n]+\s*", " ", text).strip()
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 1] + "…"


def describe_validation_error(exc: ValidationError, arg_model: type[BaseModel] | None = None) -> str:
    """pydantic's report as one line: "field.path: what is expected (got what was sent)"."""
    parts: list[str] = []
    for error in exc.errors(include_url=False):
        part = describe_error(error, arg_model)
        if part not in parts:
            parts.append(part)
    if len(parts) > MAX_SHOWN_ERRORS:
        parts = parts[:MAX_SHOWN_ERRORS] + [f"and {len(parts) - MAX_SHOWN_ERRORS} more problems"]
    return one_line("; ".join(parts))


def describe_error(error: Mapping[str, Any], arg_model: type[BaseModel] | None = None) -> str:
    where = field_path(error["loc"])
    what = expectation(error)
    if error["type"] == "extra_forbidden" and arg_model is not None:
        accepted = accepted_keys(arg_model, error["loc"][:-1])
        if accepted:
            what += f" (accepted: {', '.join(accepted)})"
    return f"{where}: {what}" if where else what


def field_path(loc: tuple) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def expectation(error: Mapping[str, Any]) -> str:
    """What the field must be, and what came instead when that helps."""
    kind, ctx = error["type"], error.get("ctx") or {}
    value: Any = error.get("input")  # whatever was sent
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    if kind == "extra_forbidden":
        return "is not an accepted key"
    if kind == "missing":
        return _SIMPLE[kind]
    if kind in _SIMPLE:
        return f"{_SIMPLE[kind]} (got {shown(value)})"
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"must be {words} {_bound(ctx[key])} (got {shown(value)})"
    if kind == "string_too_short":
        n = ctx["min_length"]
        return "must not be empty" if n == 1 else f"must be at least {n} characters"
    if kind == "string_too_long":
        return f"must be at most {ctx['max_length']} characters (got {len(value)})"
    if kind == "too_short":
        return f"must have at least {ctx['min_length']} items (got {ctx.get('actual_length')})"
    if kind == "too_long":
        return f"must have at most {ctx['max_length']} items (got {ctx.get('actual_length')})"
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx['expected']} (got {shown(value)})"
    message = error["msg"]
    return f"{message[:1].lower()}{message[1:]} (got {shown(value)})"


def shown(value: Any) -> str:
    """A short JSON rendering of what the caller sent."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # a circular structure cannot come from JSON, but never fail here
        text = repr(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # lone surrogates, visibly
    if len(text) > _SHOWN_INPUT_CHARS:
        text = text[:_SHOWN_INPUT_CHARS - 1] + "…"
    return text


def _bound(limit: Any) -> str:
    # "at most 1", not "at most 1.0": the schema's 1.0 reads as a float-only rule.
    if isinstance(limit, float) and limit.is_integer():
        return str(int(limit))
    return str(limit)


def accepted_keys(model: type[BaseModel], path: tuple) -> list[str]:
    """The keys the model reached by path accepts ([] when path does not lead to a model)."""
    reached: type[BaseModel] | None = model
    for part in path:
        field = reached.model_fields.get(part) if isinstance(part, str) else None
        reached = _model_in(field.annotation) if field is not None else None
        if reached is None:
            return []
    return list(reached.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for member in typing.get_args(annotation):
            found = _model_in(member)
            if found is not None:
                return found
    return None
