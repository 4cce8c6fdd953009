# ruamel's round-trip containers are dict and list subclasses that carry .fa, .lc and .ca (flow
# style, line/column, comments); the isinstance(x, dict/list) checks here narrow them to plain
# dict and list, which have none of those.
# pyright: reportAttributeAccessIssue=false
"""Editing a YAML file the way its author wrote it (ruamel.yaml round-trip): comments, key
order, indentation, flow or block lists and quotes kept; only what changes is touched.

ruamel keeps a comment on the entry before it: the comment at the end of a key's line, then
any full lines (blank or "# ...") up to the next entry. Those trailing lines (the "tail")
belong to what follows, so they are moved when an entry is inserted or a list is rewritten.
The file is read by pyyaml (YAML 1.1) elsewhere; strings are quoted where pyyaml would read
them as something else.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from shared.errors import ConfigError


def round_trip():
    from ruamel.yaml import YAML

    yaml = YAML()  # round-trip: comments, order, flow style and quotes kept
    yaml.preserve_quotes = True
    yaml.width = 1 << 16  # never re-wrap a long line (cue lists are long)
    return yaml


def load(yaml, text: str, path: Path):
    """The document (a CommentedMap), with `yaml` set to write it back in the file's indents."""
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.error import YAMLError

    try:
        doc = yaml.load(text)
    except YAMLError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}; fix it by hand first") from exc
    if doc is None:
        doc = CommentedMap()
    if not isinstance(doc, CommentedMap):
        raise ConfigError(f"config file {path} must hold a mapping of sections")
    mapping, sequence, offset = _indents(doc, text.splitlines())
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return doc


def _indents(doc, lines: list[str]) -> tuple[int, int, int]:
    """The file's indentation as ruamel's (mapping, sequence, offset), read from where its
    keys and list items stand (ruamel does not keep it; pyyaml's style when nothing shows)."""
    sections = [s for s in doc.values() if isinstance(s, dict) and s and not s.fa.flow_style()]
    mapping = sections[0].lc.col if sections and sections[0].lc.col else 2
    for section in sections:
        for key, value in section.items():
            if isinstance(value, list) and value and not value.fa.flow_style():
                key_column = section.lc.key(key)[1]
                line, column = value.lc.item(0)
                dash = lines[line].rfind("-", 0, column)
                return mapping, column - key_column, dash - key_column
    return mapping, mapping, 0


def dump(yaml, doc) -> str:
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


def place(mapping, name: str, order: list[str]) -> int:
    """Where a missing key goes: after the nearest key before it in `order` (first if none
    is; last if the name is not in `order` at all)."""
    before = order[:order.index(name)] if name in order else order
    present = [k for k in before if k in mapping]
    return list(mapping).index(present[-1]) + 1 if present else (0 if name in order else len(mapping))


def insert(mapping, pos: int, key: str, value: Any, comment: str | None = None,
           moves_tail: bool = True) -> None:
    """Insert at pos. The lines that followed the entry before it (a blank line, the next
    entry's heading) move below the new entry unless moves_tail is False (they head the new
    entry); a new section keeps a blank line before it when the file had one there."""
    previous = list(mapping)[pos - 1] if pos > 0 else None
    tail = take_tail(mapping, previous) if previous is not None and moves_tail else ""
    mapping.insert(pos, key, value, comment=comment)
    put_tail(mapping, key, tail)
    if tail.startswith("\n") and isinstance(value, dict):
        put_tail(mapping, previous, "\n")


def replace(mapping, key: str, value: Any) -> bool:
    """Set an existing key to `value` in the file's style; False when it already has it."""
    if _same(mapping[key], value):
        return False
    tail = take_tail(mapping, key)
    mapping[key] = styled(mapping[key], value)
    put_tail(mapping, key, tail)
    return True


def new_mapping(key: str, value: Any, comment: str | None):
    from ruamel.yaml.comments import CommentedMap

    mapping = CommentedMap()
    mapping.insert(0, key, styled(None, value), comment=comment)
    return mapping


def _same(current: Any, value: Any) -> bool:
    if isinstance(current, list) or isinstance(value, list):
        return isinstance(current, list) and isinstance(value, list) and list(current) == value
    return isinstance(current, bool) == isinstance(value, bool) and current == value


def styled(current: Any, value: Any) -> Any:
    """The new value in the file's style: a list keeps its flow or block style and the
    comments and quoting of the items that stay; a string keeps its quotes."""
    from ruamel.yaml.comments import CommentedSeq
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

    if isinstance(value, list):
        seq = current if isinstance(current, CommentedSeq) else CommentedSeq()
        kept = {str(item): (item, seq.ca.items.get(i)) for i, item in enumerate(seq)}
        seq.ca.items.clear()
        seq[:] = [kept[str(v)][0] if str(v) in kept else _string(v) for v in value]
        for i, v in enumerate(value):
            if kept.get(str(v), (None, None))[1] is not None:
                seq.ca.items[i] = kept[str(v)][1]
        if not kept or not seq:  # new, or written [] before or after: the example's [a, b] style
            seq.fa.set_flow_style()
        return seq
    if isinstance(value, str) and isinstance(current, (DoubleQuotedScalarString, SingleQuotedScalarString)):
        return type(current)(value)
    return _string(value)


def _string(value: Any) -> Any:
    """Quote a string the loader (pyyaml, YAML 1.1) would otherwise read as something else:
    ruamel writes YAML 1.2, where yes / no / on / off are plain words."""
    import yaml
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    if not isinstance(value, str):
        return value
    tag = yaml.resolver.Resolver().resolve(yaml.ScalarNode, value, (True, False))
    return value if tag == yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG else DoubleQuotedScalarString(value)


def key_comments(mapping) -> dict[str, tuple[str, str]]:
    """{key: (its own comment, the comment lines just above it)}, each as one line of text."""
    above = _token_text(mapping.ca.comment[1] if mapping.ca.comment else None)
    found = {}
    for key in mapping:
        above += _token_text(mapping.ca.items.get(key, [None, None])[1])
        own = _split(_token_of(mapping, key), _column(mapping, key))[0]
        found[key] = (_one_line(own), _one_line(_last_paragraph(above)))
        holder, index = _end_holder(mapping, key)
        above = _split(_token_of(holder, index), _column(holder, index))[1]
    return found


def take_tail(mapping, key) -> str:
    """Remove and return the lines that follow entry `key` (after its own comment)."""
    holder, index = _end_holder(mapping, key)
    token = _token_of(holder, index)
    if token is None:
        return ""
    own, tail = _split(token, _column(holder, index))
    if tail:
        token.value = own
    return tail


def put_tail(mapping, key, tail: str) -> None:
    from ruamel.yaml.error import CommentMark
    from ruamel.yaml.tokens import CommentToken

    if not tail:
        return
    holder, index = _end_holder(mapping, key)
    token = _token_of(holder, index)
    if token is None:
        slot = 0 if isinstance(holder, list) else 2
        entry = holder.ca.items.setdefault(index, [None, None, None, None])
        token = entry[slot] = CommentToken("\n", CommentMark(0))
    token.value = (token.value if token.value.endswith("\n") else token.value + "\n") + tail


def _end_holder(mapping, key):
    """The (container, index) whose comment ends entry `key`: the last item of a block list
    or the last key of a block mapping hold it, else the entry itself."""
    value = mapping[key]
    if isinstance(value, (list, dict)) and value and not value.fa.flow_style():
        last = len(value) - 1 if isinstance(value, list) else list(value)[-1]
        return _end_holder(value, last) if isinstance(value, dict) else (value, last)
    return mapping, key


def _token_of(holder, index):
    entry = holder.ca.items.get(index)
    if not entry:
        return None
    return entry[0] if isinstance(holder, list) else entry[2]


def _column(holder, index) -> int:
    try:
        return holder.lc.item(index)[1] if isinstance(holder, list) else holder.lc.key(index)[1]
    except (KeyError, IndexError, TypeError):
        return holder.lc.col or 0


def _split(token, column: int) -> tuple[str, str]:
    """A comment token's text -> (the entry's own comment with its continuation lines, the
    tail: lines at the entry's column or blank, which belong to what follows)."""
    if token is None:
        return "", ""
    lines = token.value.split("\n")
    own = [lines[0]]
    rest = lines[1:]
    while rest and rest[0].strip().startswith("#") and len(rest[0]) - len(rest[0].lstrip()) > column:
        own.append(rest.pop(0))
    return "\n".join(own) + "\n", "\n".join(rest)


def _token_text(tokens) -> str:
    if tokens is None:
        return ""
    return "".join(t.value for t in (tokens if isinstance(tokens, list) else [tokens]) if t is not None)


def _last_paragraph(text: str) -> str:
    """The comment lines after the last blank line: the ones just above what follows."""
    lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    blanks = [i for i, line in enumerate(lines) if not line.strip()]
    return "\n".join(lines[blanks[-1] + 1:] if blanks else lines)


def _one_line(comment: str) -> str:
    words = (line.strip().lstrip("#").strip() for line in comment.split("\n"))
    return " ".join(w for w in words if w)
