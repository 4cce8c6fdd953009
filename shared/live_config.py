"""The running configuration of a process, replaced when the config file changes.

Holds the current AppConfig; whoever needs a value reads `live.current` when it needs it
(never keeps a section past one request or job), or subscribes to rebuild what it built from
it, so a saved setting applies without a restart.

`watch()` follows the config file: a daemon thread watches the file's folder (so a save by
rename is seen too), reloads the file with the loader the process started with, applies every
changed key that can apply live, and reports the keys that need a restart
(shared.config.needs_restart) without applying them: those keep the value the process started
with. An invalid file is ignored with one log line, and the running config stays.

A half-written file is not applied either. An editor saving in place truncates the file and
writes it again, and an empty or cut-off YAML document is still valid: applied, it would reset
every live key it lacks to its default. So a reloaded file is compared with the last complete
one (the file at start, then each file applied), section by section: it is refused, with one
log line, when it is empty, lacks a section that one had, or has a section with no keys where
that one had keys. Keys removed from a section that is still there do apply (deleting a key is
how it goes back to its default). An editor finishes its save within milliseconds, so a file
that lacks or empties a section and then stays unchanged for SETTLE_S was meant so: it is
read again then and applied. An empty file is never applied (a restart applies it).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from shared.config import DEFAULT_CONFIG_NAME, SECRET_KEYS, AppConfig, load_config, needs_restart
from shared.errors import ConfigError

log = logging.getLogger("aokun.config")

Listener = Callable[[AppConfig, AppConfig], None]  # (old, new)
Loader = Callable[[], AppConfig]
Changes = dict[str, tuple[Any, Any]]  # "section.key" -> (old value, new value)

# A save is usually a burst of events (truncate + write, or write + rename): wait until none
# came for STEP_MS, at most DEBOUNCE_MS, then reload once. Well inside the 2 s promised.
STEP_MS, DEBOUNCE_MS = 100, 500
# A file missing a section is applied once it has stayed unchanged this long (see above).
SETTLE_S = 3.0
_SHOWN_VALUE_CHARS = 80


class LiveConfig:
    def __init__(self, config: AppConfig):
        self._config = config
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._reload_lock = threading.Lock()
        self._file_at_start: AppConfig | None = None
        self._pending: Changes = {}
        self._watched: Path | None = None  # the file followed (./config.yaml on defaults)
        self._invalid = False  # the last reload found the file invalid
        # The sections (and whether each had keys) of the last complete file: at start, then
        # each one applied. None when there is no file to compare with.
        self._shape: dict[str, bool] | None = file_shape(config.source) if config.source else None

    @property
    def current(self) -> AppConfig:
        return self._config

    @property
    def pending_restart(self) -> Changes:
        """Keys changed in the file that this process applies only after a restart."""
        return dict(self._pending)

    def subscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def replace(self, new: AppConfig) -> None:
        """Make `new` current and tell every listener (old, new); a listener that fails is
        logged and does not keep the others from hearing of it."""
        with self._lock:
            old, self._config = self._config, new
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(old, new)
            except Exception:
                log.exception("applying the changed config failed in %r", listener)

    def reload(self, load: Loader | None = None) -> Changes | None:
        """Read the config file again and apply its live keys; return them, or None when the
        file is invalid (logged in one line; nothing changes)."""
        load = load or self._default_loader()
        with self._reload_lock:
            try:
                from_file = load()
            except (ConfigError, OSError) as exc:
                log.warning("config file %s not applied: %s; the running config stays until a"
                            " valid version is saved", self._watched, _one_line(exc))
                self._invalid = True
                return None
            path = self._watched or self._config.source
            shape = file_shape(path)
            problem = incomplete(self._shape, shape)
            if problem and (shape == {} or _age_s(path) < SETTLE_S):
                settles = "" if shape == {} else f" or it stays so for {SETTLE_S:.0f} s"
                log.warning("config file %s not applied: it %s (half-written?); the running config"
                            " stays until a complete version is saved%s", path, problem, settles)
                self._invalid = True
                if shape:
                    self._read_again_later(load)
                return None
            if shape is not None:
                self._shape = shape
            baseline = self._file_at_start or self._config
            pending = {k: v for k, v in changed_keys(baseline, from_file).items() if needs_restart(k)}
            applied = {k: v for k, v in changed_keys(self._config, from_file).items()
                       if not needs_restart(k)}
            if applied or pending != self._pending or self._invalid:
                # INFO when everything saved applied; WARNING when keys wait for a restart.
                level = logging.WARNING if pending else logging.INFO
                log.log(level, describe_reload(self._watched, applied, pending))
            self._pending, self._invalid = pending, False
            if applied:
                self.replace(with_values(self._config, {k: new for k, (_, new) in applied.items()}))
            return applied

    def _read_again_later(self, load: Loader) -> None:
        """Reload once the file has had SETTLE_S to settle (a section removed on purpose)."""
        timer = threading.Timer(SETTLE_S + 0.2, self._reload_logged, args=(load,))
        timer.daemon = True
        timer.start()

    def _reload_logged(self, load: Loader) -> None:
        try:
            self.reload(load)
        except Exception:
            log.exception("reloading the config file failed; the running config stays")

    def watch(self, load: Loader | None = None) -> "ConfigWatcher | None":
        """Follow the config file from now on. A process running on defaults follows
        ./config.yaml, the file the panel's settings page creates for it (and the one it
        would read at its next start)."""
        path = self._config.source or Path.cwd() / DEFAULT_CONFIG_NAME
        self._watched = path
        load = load or (lambda: load_config(path))
        if self._config.source is None and not path.exists():
            self._file_at_start = self._config  # defaults: what a new file changes is news
        else:
            try:
                self._file_at_start = load()
                self._shape = file_shape(path) or self._shape
            except (ConfigError, OSError) as exc:
                log.warning("config file %s cannot be read now (%s); changes apply once it is valid",
                            path, _one_line(exc))
            else:
                self.reload(lambda: self._file_at_start)  # anything saved while the process started
        watcher = ConfigWatcher(self, Path(path), load)
        watcher.start()
        return watcher

    def _default_loader(self) -> Loader:
        source = self._config.source
        if source is None:
            raise ConfigError("no config file to reload: the process runs on built-in defaults")
        return lambda: load_config(source)


class ConfigWatcher:
    """A daemon thread reloading `live` whenever `path` changes, until stop()."""

    def __init__(self, live: LiveConfig, path: Path, load: Loader):
        self.live, self.path, self.load = live, path, load
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="config-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            self._follow(force_polling=None)
        except Exception as exc:  # inotify limits, an unwatchable folder: poll instead
            if self._stop.is_set():
                return
            log.warning("cannot watch %s for changes (%s); polling it instead", self.path.parent, exc)
            try:
                self._follow(force_polling=True)
            except Exception:
                log.exception("config watcher stopped: changes to %s apply after a restart", self.path)

    def _follow(self, force_polling: bool | None) -> None:
        import watchfiles

        name = self.path.name
        changes = watchfiles.watch(self.path.parent, watch_filter=lambda _, p: os.path.basename(p) == name,
                                   debounce=DEBOUNCE_MS, step=STEP_MS, stop_event=self._stop,
                                   recursive=False, raise_interrupt=False, force_polling=force_polling)
        for _ in changes:
            try:
                self.live.reload(self.load)
            except Exception:
                log.exception("reloading %s failed; the running config stays", self.path)


def file_shape(path: Path | None) -> dict[str, bool] | None:
    """{section: whether it holds any key} of a config file; {} for an empty document; None
    when there is no such file or it is no mapping (the loader reports what is wrong)."""
    if path is None:
        return None
    # Lazy imports: PyYAML only when a file is compared, as in shared.config.
    from shared.safe_yaml import safe_load

    try:
        raw = safe_load(Path(path).read_text(encoding="utf-8"))
    except Exception:  # unreadable or invalid: the loader says so in its own words
        return None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        return None
    return {str(name): bool(keys) for name, keys in raw.items()}


def _age_s(path: Path | None) -> float:
    """Seconds since the file was last written (0 when it cannot be read)."""
    try:
        return time.time() - Path(path).stat().st_mtime
    except (OSError, TypeError):
        return 0.0


def incomplete(before: dict[str, bool] | None, now: dict[str, bool] | None) -> str | None:
    """What makes `now` look half-written next to the last complete file `before`, or None."""
    if not before or now is None:
        return None
    if not now:
        return "is empty"
    missing = [name for name in before if name not in now]
    if missing:
        return f"lacks the section(s) {', '.join(missing)[:200]} it had"
    emptied = [name for name, had_keys in before.items() if had_keys and not now[name]]
    if emptied:
        return f"has no keys in the section(s) {', '.join(emptied)[:200]}"
    return None


def changed_keys(old: AppConfig, new: AppConfig) -> Changes:
    """{section.key: (old, new)} for every option whose value differs."""
    changes = {}
    for section in _sections():
        before, after = getattr(old, section), getattr(new, section)
        if before == after:
            continue
        for f in dataclasses.fields(before):
            a, b = getattr(before, f.name), getattr(after, f.name)
            if a != b:
                changes[f"{section}.{f.name}"] = (a, b)
    return changes


def with_values(config: AppConfig, values: dict[str, Any]) -> AppConfig:
    """config with the given section.key values replaced."""
    by_section: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        section, name = key.split(".", 1)
        by_section.setdefault(section, {})[name] = value
    sections = {name: dataclasses.replace(getattr(config, name), **keys)
                for name, keys in by_section.items()}
    return dataclasses.replace(config, **sections)


def describe_reload(path: Path | None, applied: Changes, pending: Changes) -> str:
    """The one log line a reload writes."""
    parts = []
    if applied:
        parts.append(f"applied {_listed(applied)}")
    if pending:
        parts.append(f"needs a restart to apply (not applied): {_listed(pending)}")
    return f"config {path} changed: " + ("; ".join(parts) or "nothing to apply, no key waits for a restart")


def _listed(changes: Changes) -> str:
    return ", ".join(f"{key} (hidden) changed" if key in SECRET_KEYS
                     else f"{key} {_shown(old)} -> {_shown(new)}" for key, (old, new) in changes.items())


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    text = str(value)
    return text if len(text) <= _SHOWN_VALUE_CHARS else text[:_SHOWN_VALUE_CHARS - 3] + "..."


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())  # YAML errors come on several lines


def _sections() -> list[str]:
    return [f.name for f in dataclasses.fields(AppConfig) if f.name != "source"]


def apply_log_level(level: str) -> None:
    """Set the level of the loggers a process configured at start (root and uvicorn's)."""
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).setLevel(level)
