"""The running configuration of a process, replaced when the config file changes.

Holds the current AppConfig; whoever needs a value reads `live.now` when it needs it
(never keeps a section past one request or job), or subscribes to rebuild what it built from
it, so a saved setting applies without a restart.

`watch()` follows the config file: a daemon thread watches the file's folder (so a save by
rename is seen too), reloads the file with the loader the process started with, applies every
changed key that can apply live, and reports the keys that need a restart
(shared.config.needs_restart) without applying them: those keep the value the process started
with. An invalid file is reported with one log line and not applied: the running config stays.

A half-written file is never applied. An editor saving in place truncates the file and writes
it again, maybe in several writes, and a cut-off YAML document is still valid: applied, it would
set every key it lacks, or whose value it cuts, to its default. So the watcher applies a file
only once it has settled: two reads SETTLE_S apart found the same bytes and the same stat
(size, modification and change times, inode), and the file did not change while it was loaded
either. A file still being written changes between the two reads and is read again until it
stays the same. A writer that stops mid-file for longer than SETTLE_S is the one case this
cannot tell from a finished save; for the commonest cut, at a line, a second check holds: a
settled file is compared with the last complete one (the file at start, then each file
applied), section by section, and is refused, with one log line, when it is empty, lacks a
section that one had, or has a section with no keys where that one had keys. Keys removed from
a section that is still there do apply (deleting a key is how it goes back to its default). A
file that lacks or empties a section and stays the same for INCOMPLETE_SETTLE_S was meant so:
it is applied then. An empty file is never applied (a restart applies it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.config import DEFAULT_CONFIG_NAME, SECRET_KEYS, AppConfig, load_config, needs_restart
from shared.errors import ConfigError

log = logging.getLogger("aokun.config")

Listener = Callable[[AppConfig, AppConfig], None]  # (old, new)
Loader = Callable[[], AppConfig]
Changes = dict[str, tuple[Any, Any]]  # "section.key" -> (old value, new value)

# A save is usually a burst of events (truncate + write, or write + rename): wait until none
# came for STEP_MS, at most DEBOUNCE_MS, before looking at the file.
STEP_MS, DEBOUNCE_MS = 100, 500
# A file applies once two reads this far apart found it the same (see above). An editor writes
# a whole file within milliseconds; with the debounce a save still applies well inside the 2 s
# promised.
SETTLE_S = 0.3
# A settled file that lacks or empties a section applies once it has stayed the same this long.
INCOMPLETE_SETTLE_S = 3.0
_SHOWN_VALUE_CHARS = 80


@dataclasses.dataclass(frozen=True)
class FileState:
    """One read of the config file: the digest of its bytes and its stat, which two reads
    compare (equal: nothing wrote to it in between), and its text."""

    digest: str | None = None  # None: no such file, or it cannot be read
    stat: tuple = ()
    text: str = dataclasses.field(default="", compare=False)

    @classmethod
    def read(cls, path: Path | None) -> FileState:
        if path is None:
            return cls()
        try:
            with open(path, "rb") as file:
                st = os.fstat(file.fileno())
                data = file.read()
        except OSError:
            return cls()
        return cls(hashlib.sha256(data).hexdigest(),
                   (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns),
                   data.decode("utf-8", errors="replace"))

    def age_s(self) -> float:
        """Seconds since the file was last written or replaced (0 when it cannot be read)."""
        if not self.stat:
            return 0.0
        return time.time() - max(self.stat[3], self.stat[4]) / 1e9


class LiveConfig:
    def __init__(self, config: AppConfig):
        self._config = self._start = config
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._reload_lock = threading.Lock()
        self._file_at_start: AppConfig | None = None
        self._start_unsettled = False  # written while loaded at start: the first settled
        # version stands for the file at start
        self._pending: Changes = {}
        self._watched: Path | None = None  # the file followed (./config.yaml on defaults)
        self._invalid = False  # the last reload refused the file
        # The sections (and whether each had keys) of the last complete file: at start, then
        # each one applied. None when there is no file to compare with.
        self._shape: dict[str, bool] | None = shape_of(FileState.read(config.source))

    @property
    def now(self) -> AppConfig:
        """The settings as they are at this moment: read at use time, never kept."""
        return self._config

    @property
    def at_start(self) -> AppConfig:
        """The settings the process started with: where the keys it cannot take over from a
        changed file (shared.config.needs_restart) are read, for what was built from them."""
        return self._start

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
        """Read the config file now and apply its live keys; return them, or None when the
        file is invalid or looks half-written (logged in one line; nothing changes). The
        watcher does not call this: it waits for the file to settle (apply_when_settled)."""
        load = load or self._default_loader()
        path = self._watched or self._config.source
        with self._reload_lock:
            state = FileState.read(path)
            try:
                from_file = load()
            except (ConfigError, OSError) as exc:
                self._refuse_invalid(exc)
                return None
            problem = incomplete(self._shape, shape_of(state))
            if problem:
                self._refuse_incomplete(path, problem)
                return None
            return self._apply(from_file, shape_of(state))

    def apply_when_settled(self, load: Loader, stop: threading.Event) -> Changes | None:
        """Wait until the followed file has settled (see the module's doc), then apply it as
        reload does; None when `stop` is set first or the file is refused."""
        path = self._watched
        seen, since, reported = FileState.read(path), time.monotonic(), None
        while not stop.wait(SETTLE_S):
            now = FileState.read(path)
            if now != seen:  # still being written: wait until it stays the same
                seen, since = now, time.monotonic()
                continue
            shape = shape_of(now)
            problem = incomplete(self._shape, shape)
            if problem == EMPTY:
                self._refuse_incomplete(path, problem)
                return None
            if problem and time.monotonic() - since < INCOMPLETE_SETTLE_S:
                if reported != now:
                    self._refuse_incomplete(path, problem)
                    reported = now
                continue
            with self._reload_lock:
                try:
                    from_file = load()
                except (ConfigError, OSError) as exc:
                    if FileState.read(path) != now:
                        continue  # it was being written after all
                    self._refuse_invalid(exc)
                    return None
                if FileState.read(path) != now:
                    continue  # written while loaded: what was loaded may be a part
                if self._start_unsettled:
                    self._file_at_start, self._start_unsettled = from_file, False
                return self._apply(from_file, shape)
        return None

    def _apply(self, from_file: AppConfig, shape: dict[str, bool] | None) -> Changes:
        """Make the live keys of a complete, valid file current (under _reload_lock)."""
        if shape is not None:
            self._shape = shape
        baseline = self._file_at_start or self._config
        pending = {k: v for k, v in changed_keys(baseline, from_file).items() if needs_restart(k)}
        applied = {k: v for k, v in changed_keys(self._config, from_file).items() if not needs_restart(k)}
        if applied or pending != self._pending or self._invalid:
            # INFO when everything saved applied; WARNING when keys wait for a restart.
            level = logging.WARNING if pending else logging.INFO
            log.log(level, describe_reload(self._watched, applied, pending))
        self._pending, self._invalid = pending, False
        if applied:
            self.replace(with_values(self._config, {k: new for k, (_, new) in applied.items()}))
        return applied

    def _refuse_invalid(self, exc: BaseException) -> None:
        log.warning("config file %s not applied: %s; the running config stays until a valid version"
                    " is saved", self._watched or self._config.source, _one_line(exc))
        self._invalid = True

    def _refuse_incomplete(self, path: Path | None, problem: str) -> None:
        settles = "" if problem == EMPTY else f" or it stays so for {INCOMPLETE_SETTLE_S:.0f} s"
        log.warning("config file %s not applied: it %s (half-written?); the running config stays"
                    " until a complete version is saved%s", path, problem, settles)
        self._invalid = True

    def watch(self, load: Loader | None = None) -> ConfigWatcher | None:
        """Follow the config file from now on. A process running on defaults follows
        ./config.yaml, the file the panel's settings page creates for it (and the one it
        would read at its next start)."""
        path = self._config.source or Path.cwd() / DEFAULT_CONFIG_NAME
        self._watched = path
        load = load or (lambda: load_config(path))
        settle_first = False
        if self._config.source is None and not path.exists():
            self._file_at_start = self._config  # defaults: what a new file changes is news
        else:
            state = FileState.read(path)
            try:
                from_file = load()
            except (ConfigError, OSError) as exc:
                log.warning("config file %s cannot be read now (%s); changes apply once it is valid",
                            path, _one_line(exc))
            else:
                # What was loaded is the file at start unless it changed meanwhile. Written in
                # the last moments, the watcher applies it once settled; else anything saved
                # while the process started applies now.
                self._start_unsettled = FileState.read(path) != state
                settle_first = self._start_unsettled or state.age_s() < SETTLE_S
                if not self._start_unsettled:
                    self._file_at_start = from_file
                if not settle_first:
                    self._shape = shape_of(state) or self._shape
                    self.reload(lambda: from_file)
        watcher = ConfigWatcher(self, Path(path), load, settle_first)
        watcher.start()
        return watcher

    def _default_loader(self) -> Loader:
        source = self._config.source
        if source is None:
            raise ConfigError("no config file to reload: the process runs on built-in defaults")
        return lambda: load_config(source)


class ConfigWatcher:
    """A daemon thread applying `path` to `live` whenever it changes (once it has settled),
    until stop()."""

    def __init__(self, live: LiveConfig, path: Path, load: Loader, settle_first: bool = False):
        self.live, self.path, self.load = live, path, load
        self._settle_first = settle_first
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="config-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        if self._settle_first:
            self._apply()
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
            self._apply()

    def _apply(self) -> None:
        try:
            self.live.apply_when_settled(self.load, self._stop)
        except Exception:
            log.exception("reloading %s failed; the running config stays", self.path)


EMPTY = "is empty"


def shape_of(state: FileState) -> dict[str, bool] | None:
    """{section: whether it holds any key} of a config file; {} for an empty document; None
    when there is no such file or it is no mapping (the loader reports what is wrong)."""
    if state.digest is None:
        return None
    # Lazy imports: PyYAML only when a file is compared, as in shared.config.
    from shared.safe_yaml import safe_load

    try:
        raw = safe_load(state.text)
    except Exception:  # invalid: the loader says so in its own words
        return None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        return None
    return {str(name): bool(keys) for name, keys in raw.items()}


def incomplete(before: dict[str, bool] | None, now: dict[str, bool] | None) -> str | None:
    """What makes `now` look half-written next to the last complete file `before`, or None."""
    if not before or now is None:
        return None
    if not now:
        return EMPTY
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


def follow_log_level(live: LiveConfig) -> None:
    """Apply server.log_level to this process's loggers whenever a changed file sets it."""

    def changed(old: AppConfig, new: AppConfig) -> None:
        if old.server.log_level != new.server.log_level:
            apply_log_level(live.now.server.log_level)

    live.subscribe(changed)


def apply_log_level(level: str) -> None:
    """Set the level of the loggers a process configured at start (root and uvicorn's)."""
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).setLevel(level)
