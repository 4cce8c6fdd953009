"""A folder of Markdown notes (Obsidian, Logseq pages, plain .md files) as rows to memorize.

- Every .md / .markdown file under the folder, in path order; hidden folders (.obsidian,
  .git, .trash) are left out. A single .md file works too.
- A note of at most SPLIT_CHARS characters is one memory: its title, a blank line, its text.
  A longer note is one memory per heading section (ATX headings, #..######, outside code
  fences), each starting with its heading path ("Kyoto trip › Day 2 › Food"): one memory
  should be what one embedding can represent (the local model reads about 512 tokens, some
  2,000 characters), and a heading is where the writer said a new subject starts. Sections
  with no text of their own are left out (their heading is in their subsections' paths).
- YAML front matter (between --- lines, read with a YAML parser): tags / tag / topics ->
  topics; date, else created -> original_time; title -> the note's title (else its first line
  when that is a level-1 heading, else its file name); participants / people -> participants.
  Without a date, a file named like a daily note (2024-05-08....md) takes that date.
- A row says where it is as path:line, the line of its section's first line in the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path

from shared.transfer.rows import BadRow, Row, check_original_time

SPLIT_CHARS = 2000
SUFFIXES = (".md", ".markdown")
PATH_SEPARATOR = " › "
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_DATED_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})(?!\d)")
_TAG_SPLIT = re.compile(r"[,\s]+")


def note_files(root: Path) -> list[Path]:
    """The notes under a folder (or the one note given), in path order."""
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))


def read_rows(root: Path) -> Iterator[Row | BadRow]:
    base = root.parent if root.is_file() else root
    for path in note_files(root):
        name = path.relative_to(base).as_posix()
        try:
            data = path.read_bytes()
        except OSError as exc:
            yield BadRow(f"{name}:1", f"cannot read the note ({exc.strerror or exc})")
            continue
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
            yield BadRow(f"{name}:{line}", f"not valid UTF-8: byte 0x{data[exc.start]:02x} at byte "
                                           f"{column} of the line; save the note as UTF-8 text")
            continue
        yield from note_rows(name, text)


def note_rows(name: str, text: str) -> Iterator[Row | BadRow]:
    """The rows of one note; name is its path under the imported folder."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    try:
        front, skipped = front_matter(lines)
        metadata, title = front_metadata(front)
    except ValueError as exc:
        yield BadRow(f"{name}:1", str(exc))
        return
    body = lines[skipped:]
    title = title or _first_heading(body) or Path(name).stem
    if "original_time" not in metadata:
        dated = _DATED_NAME.match(Path(name).name)
        if dated and _iso_date(dated.group(1)):
            metadata["original_time"] = dated.group(1)
    for line, content in _pieces(body, title):
        yield Row(where=f"{name}:{skipped + line}", content=content, metadata=dict(metadata),
                  source=f"markdown\n{name}\n{content}")


def front_matter(lines: list[str]) -> tuple[dict, int]:
    """(the front matter's keys, how many lines it takes); ({}, 0) when the note has none."""
    if not lines or lines[0].strip() != "---":
        return {}, 0
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return {}, 0  # an opening rule with no closing one: a horizontal line, not front matter
    # Lazy imports: PyYAML only for a note that has front matter.
    import yaml

    from shared.safe_yaml import YamlRefused, safe_load

    try:
        loaded = safe_load("\n".join(lines[1:end]))
    except YamlRefused as exc:
        raise ValueError(f"front matter refused: it {exc}") from None
    except yaml.YAMLError as exc:
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise ValueError(f"front matter is not valid YAML ({problem}): fix it or remove it") from None
    if loaded is None:
        return {}, end + 1
    if not isinstance(loaded, dict):
        raise ValueError("front matter must be keys and values (tags: [...], date: 2024-05-08)")
    return loaded, end + 1


def front_metadata(front: dict) -> tuple[dict, str | None]:
    """(memorize's metadata from the front matter, the note's title if it gives one)."""
    metadata = {}
    tags = _labels(front, ("tags", "tag", "topics"), strip="#")
    if tags:
        metadata["topics"] = tags
    people = _labels(front, ("participants", "people"))
    if people:
        metadata["participants"] = people
    when = next((front[k] for k in ("date", "created") if front.get(k) is not None), None)
    if when is not None:
        metadata["original_time"] = _original_time(when)
    title = front.get("title")
    return metadata, str(title).strip() if title is not None and str(title).strip() else None


def _labels(front: dict, keys: tuple[str, ...], strip: str = "") -> list[str]:
    labels: list[str] = []
    for key in keys:
        value = front.get(key)
        if value is None:
            continue
        items = _TAG_SPLIT.split(value) if isinstance(value, str) else value
        if not isinstance(items, list) or any(isinstance(i, (dict, list)) for i in items):
            raise ValueError(f"front matter {key} must be a list of words or one string of them")
        labels += [str(i).strip().lstrip(strip) for i in items if str(i).strip().lstrip(strip)]
    return list(dict.fromkeys(labels))


def _original_time(value) -> str:
    if isinstance(value, (date, datetime)):
        check_original_time(value.isoformat())
        return value.isoformat()
    text = str(value).strip()
    if not _iso_date(text):
        raise ValueError(f"front matter date {text[:40]!r} is not an ISO-8601 date such as "
                         "2024-05-08 or 2024-05-08T13:56")
    check_original_time(text)
    return text


def _iso_date(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


def _first_heading(body: list[str]) -> str | None:
    first = next((line for line in body if line.strip()), "")
    match = _HEADING.match(first)
    return match.group(2).strip() if match and len(match.group(1)) == 1 else None


def _pieces(body: list[str], title: str) -> Iterator[tuple[int, str]]:
    """(line in the body, counted from 1; text) of each memory of a note."""
    text = "\n".join(body).strip()
    if not text:
        return
    if len(text) <= SPLIT_CHARS:
        start = next(i for i, line in enumerate(body, 1) if line.strip())
        first = _HEADING.match(body[start - 1])
        # A note that opens with its title as a heading says it already.
        yield start, text if first and first.group(2).strip() == title else f"{title}\n\n{text}"
        return
    for start, path, lines in _sections(body):
        section = "\n".join(lines).strip()
        if path[:1] == [title]:
            path = path[1:]  # the note's title heading
        if section:
            yield start, PATH_SEPARATOR.join([title, *path]) + "\n\n" + section


def _sections(body: list[str]) -> Iterator[tuple[int, list[str], list[str]]]:
    """(first line, heading path, text lines) per section; headings inside code fences are
    text."""
    path: list[tuple[int, str]] = []
    start, lines, fence = 1, [], None
    for number, line in enumerate(body, 1):
        marker = _FENCE.match(line)
        if marker and (fence is None or marker.group(1)[0] == fence):
            fence = None if fence else marker.group(1)[0]
        heading = _HEADING.match(line) if fence is None and not marker else None
        if heading is None:
            lines.append(line)
            continue
        yield start, [t for _, t in path], lines
        level = len(heading.group(1))
        path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, heading.group(2).strip())]
        start, lines = number, []
    yield start, [t for _, t in path], lines
