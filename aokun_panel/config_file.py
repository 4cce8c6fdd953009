"""The config file as people keep it: every key described by config.example.yaml's comments,
and changed keys saved into config.yaml with the user's comments, key order and layout kept.

The loader (shared/config.py) reads with pyyaml; the file is edited with ruamel.yaml because
it keeps comments (shared/yaml_roundtrip.py). A save is checked by parsing the exact text to be
written as the loader does and building it with the loader's build_config, relative paths
against the file's folder: what is refused here is what every process would refuse, with the
same message, and a refused save writes nothing.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
import threading
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from aokun_panel import yaml_roundtrip as rt
from shared import platform
from shared.config import DEFAULT_CONFIG_NAME, AppConfig, build_config, needs_restart
from shared.errors import ConfigError

# The packaged copy of the top-level config.example.yaml (the file people copy), so that an
# installed package has it too; tests/process/test_install.py keeps the two identical.
# The commented example the settings page shows, shipped with shared/ (packages are installed
# as plain folders, so the resource is a real file).
EXAMPLE_PATH = Path(str(resources.files("shared.resources").joinpath("config.example.yaml")))
NEW_FILE_MODE = 0o644
_SAVE_LOCK = threading.Lock()  # one save at a time in this process: read, change, replace
KEEP_BACKUPS = 5               # .bak copies kept beside the file; older ones are removed
_BACKUP_NAME = re.compile(r"\.(\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d)(?:-(\d+))?\.bak")


@dataclass(frozen=True)
class Setting:
    key: str                  # "section.key"
    description: str          # the key's own comment (one line)
    note: str                 # lines above a key that has its own comment too: a group heading
    default: Any              # the dataclass default, as JSON (paths as text, tuples as lists)
    kind: str                 # bool | int | float | choice | subset | words | path | text
    choices: tuple[str, ...]  # for choice and subset
    minimum: float | None
    maximum: float | None
    restart: bool             # a change applies only after a restart


@dataclass(frozen=True)
class SaveReceipt:
    path: Path
    backup: Path | None       # the copy of the previous file (None when none was written)
    created: bool             # the file did not exist: made from config.example.yaml
    saved: tuple[str, ...]    # keys whose value changed in the file

    @property
    def live(self) -> list[str]:
        return [key for key in self.saved if not needs_restart(key)]

    @property
    def restart(self) -> list[str]:
        return [key for key in self.saved if needs_restart(key)]


def config_target(config: AppConfig) -> Path:
    """The file a save writes: the one the running config came from; with none (defaults in
    use), ./config.yaml, the file every process started in this folder reads next."""
    return config.source if config.source is not None else Path.cwd() / DEFAULT_CONFIG_NAME


def as_json(value: Any) -> Any:
    """A config value as the page shows and sends it (paths as text, None as "", lists)."""
    if value is None:
        return ""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (tuple, list)):
        return [as_json(v) for v in value]
    return value


def example_settings(example: Path = EXAMPLE_PATH) -> dict[str, tuple[Setting, ...]]:
    """{section: settings} in the example file's order, described by its comments, with the
    defaults and rules of shared/config.py (read once per version of the file)."""
    example = Path(example)
    try:
        version = example.stat().st_mtime_ns
    except OSError:
        version = 0
    return _described(example, version)


@lru_cache(maxsize=4)
def _described(example: Path, _version: int) -> dict[str, tuple[Setting, ...]]:
    yaml = rt.round_trip()
    doc = rt.load(yaml, _read(example), example)
    # Each section's default is made by its class (field(default_factory=MemoryConfig), ...).
    classes = {f.name: typing.cast(type, f.default_factory)
               for f in dataclasses.fields(AppConfig) if f.name != "source"}
    described = {}
    for section, keys in doc.items():
        if section not in classes:
            raise ConfigError(f"{example}: section {section!r} is not in shared/config.py")
        comments = rt.key_comments(keys)
        described[section] = tuple(_setting(example, section, classes[section], key, *comments[key])
                                   for key in keys)
    return described


def _setting(example: Path, section: str, cls: type, key: str, own: str, above: str) -> Setting:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if key not in fields:
        raise ConfigError(f"{example}: {section}.{key} is not in shared/config.py")
    rules, hint = fields[key].metadata, typing.get_type_hints(cls)[key]
    return Setting(f"{section}.{key}", own or above, above if own else "", as_json(fields[key].default),
                   _kind(hint, rules), tuple(rules.get("choices") or rules.get("subset_of") or ()),
                   rules.get("min"), rules.get("max"), needs_restart(f"{section}.{key}"))


def _kind(hint: Any, rules: Mapping) -> str:
    if hint in (bool, int, float):
        return hint.__name__
    if hint in (Path, Path | None):
        return "path"
    if typing.get_origin(hint) is tuple:
        return "subset" if rules.get("subset_of") else "words"
    return "choice" if rules.get("choices") else "text"


def save_settings(path: Path, changes: Mapping[str, Any], example: Path = EXAMPLE_PATH,
                  now: datetime | None = None) -> SaveReceipt:
    """Set the changed keys ({"section.key": value}) in the config file at `path` (made from
    the example when missing): validated by the loader first, written atomically, the old
    file kept beside it as <name>.<time>.bak. Raises ConfigError (nothing written) or OSError."""
    wanted = _parse_changes(changes)
    path = Path(path).resolve()
    layout = example_settings(example)
    with _SAVE_LOCK:
        created = not path.is_file()
        yaml = rt.round_trip()
        doc = rt.load(yaml, _read(example if created else path), path)
        saved = tuple(f"{s}.{k}" for (s, k), value in wanted.items() if _apply(doc, s, k, value, layout))
        if not saved:
            return SaveReceipt(path, None, False, ())
        text = rt.dump(yaml, doc)
        validate_text(text, path.parent)
        backup = None if created else _backup(path, now or datetime.now())
        try:
            write_atomically(path, text)
        except BaseException:
            if backup is not None:
                backup.unlink(missing_ok=True)
            raise
        if backup is not None:
            prune_backups(path)
    return SaveReceipt(path, backup, created, saved)


def prune_backups(path: Path, keep: int = KEEP_BACKUPS) -> list[Path]:
    """Remove all but the newest `keep` <name>.<time>.bak copies of `path` (newest by the time
    in their names: copy2 keeps the old file's mtime, so mtimes say nothing of when a copy was
    made). Returns the removed ones; a copy that cannot be removed is left, not an error."""
    found = []
    for candidate in path.parent.glob(f"{path.name}.*.bak"):
        stamp = _BACKUP_NAME.fullmatch(candidate.name[len(path.name):])
        if stamp:
            found.append(((stamp.group(1), int(stamp.group(2) or 1)), candidate))
    removed = []
    for _, old in sorted(found)[:-keep] if keep > 0 else sorted(found):
        try:
            old.unlink()
            removed.append(old)
        except OSError:
            pass
    return removed


def validate_text(text: str, base_dir: Path) -> AppConfig:
    """Parse `text` as the loader does (pyyaml) and build it with the loader's rules."""
    import yaml

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"the config would not parse: {exc}") from exc
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError("the config file must hold a mapping of sections")
    return build_config(raw or {}, base_dir)


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, fsync it, os.replace it over `path`
    (a reader sees the old file or the new one, never part of one), then fsync the folder."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else NEW_FILE_MODE
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    platform.fsync_directory(path.parent)  # the rename itself survives a power cut


def _backup(path: Path, now: datetime) -> Path:
    """config.yaml -> config.yaml.2026-12-01T15-30-00.bak (-2, -3... within one second)."""
    stamp = now.strftime("%Y-%m-%dT%H-%M-%S")
    target, n = path.with_name(f"{path.name}.{stamp}.bak"), 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{stamp}-{n}.bak")
    shutil.copy2(path, target)
    return target


def _parse_changes(changes: Mapping[str, Any]) -> dict[tuple[str, str], Any]:
    if not isinstance(changes, Mapping) or not changes:
        raise ConfigError('send the changed settings as a JSON object {"section.key": value}')
    parsed = {}
    for name, value in changes.items():
        section, _, key = str(name).partition(".")
        if not section or not key:
            raise ConfigError(f"setting names look like section.key; got {name!r}")
        parsed[(section, key)] = value
    return parsed


def _apply(doc, section: str, key: str, value: Any, layout: dict[str, tuple[Setting, ...]]) -> bool:
    """Set one key in the document; False when the file already has that value. A missing
    key or section goes where the example has it, with the example's description."""
    from ruamel.yaml.comments import CommentedMap

    keys = {s.key.split(".", 1)[1]: s for s in layout.get(section, ())}
    described = keys.get(key)
    comment = described.description if described else None
    if section not in doc:
        rt.insert(doc, rt.place(doc, section, list(layout)), section, rt.new_mapping(key, value, comment))
        return True
    if doc[section] is None:  # "memory:" with nothing under it
        doc[section] = CommentedMap()
    entries = doc[section]
    if not isinstance(entries, CommentedMap):
        raise ConfigError(f"config section {section!r} must be a mapping of keys")
    if key in entries:
        return rt.replace(entries, key, value)
    rt.insert(entries, rt.place(entries, key, list(keys)), key, rt.styled(None, value), comment,
              moves_tail=not (described and described.note))
    return True


def _read(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
