"""Forgetting and upkeep: importance decay, archival, the atom sweep and backups.

Each job takes `now` (tests inject it, nothing waits) and returns what it changed. Workers run
them on schedule through their periodic jobs; memory_maintenance and `aokun maintenance` run
them by hand. Memories themselves (their importance, the archived flag) change through the
memory service, the one way to change a memory; atoms, graph entries, meta and backups here.
"""

from __future__ import annotations

import calendar
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, get_args

from shared import __version__
from shared.errors import InvalidInput
from shared.live_config import LiveConfig
from shared.memories import MemoryService
from shared.store.backup import prune_backups, sweep_partials
from shared.store.model import meta
from shared.units import DAY

log = logging.getLogger("aokun.lifecycle")

# The maintenance actions, in the order "all" runs them (tools, CLI and models use this).
MaintenanceAction = Literal["decay", "archive", "atoms", "backup", "reconcile", "all"]
ACTIONS: tuple[str, ...] = get_args(MaintenanceAction)


def decay_boundaries(previous: float, now: float, hour: int, minute: int) -> list[float]:
    """The daily decay times (UTC hour:minute) in (previous, now], oldest first."""
    day = datetime.fromtimestamp(previous, timezone.utc).replace(hour=hour, minute=minute, second=0,
                                                                 microsecond=0)
    moment = calendar.timegm(day.timetuple())
    times = []
    while moment <= now:
        if moment > previous:
            times.append(float(moment))
        moment += DAY
    return times


class Lifecycle:
    """The upkeep jobs. Each reads the process's settings when it runs (`live.now`), so a
    saved forgetting.* or backup.* key applies from the next run."""

    def __init__(self, live: LiveConfig, memories: MemoryService):
        self.live = live
        self.memories = memories
        self.store = memories.store

    def decay(self, now: float) -> dict:
        """Apply every daily decay due since the last one (catching up after downtime)."""
        f = self.live.now.forgetting
        previous = self.store.meta.get(meta.DECAY_APPLIED_AT)
        if previous is None:  # a new store: start counting from the last decay time
            self._set_meta(meta.DECAY_APPLIED_AT,
                           (decay_boundaries(now - DAY, now, f.decay_hour, f.decay_minute) or [now])[-1])
            return {"days": 0, "memories": 0}
        due = decay_boundaries(previous, now, f.decay_hour, f.decay_minute)
        if not due:
            return {"days": 0, "memories": 0}
        decayed = self.memories.apply_decay(len(due), f, now, applied_at=due[-1])
        return {"days": len(due), "memories": decayed}

    def archive(self, now: float) -> dict:
        f = self.live.now.forgetting
        if not f.auto_cleanup_enabled:
            return {"archived": 0, "enabled": False}
        ids = self.memories.archive_stale(now - f.cleanup_days_threshold * DAY,
                                          f.cleanup_importance_threshold)
        return {"archived": len(ids), "ids": ids[:100]}

    def sweep_atoms(self, now: float) -> dict:
        """active -> expired -> forgotten -> purged (with graph output), each after its delay."""
        f = self.live.now.forgetting
        with self.store.write() as tx:
            expired = tx.atoms.expire(now)
            forgotten = tx.atoms.forget(now - f.atom_forget_delay_days * DAY, now)
            purged = tx.atoms.purge(now - f.atom_purge_delay_days * DAY, now)
            entries = tx.graph.entries_of_atoms(purged)
            tx.vectors.delete_owners("graph_entry", entries, now)
            removed = tx.graph.delete_entries(entries)
        return {"expired": len(expired), "forgotten": len(forgotten), "purged": len(purged), **removed}

    def backup(self, now: float, reason: str = "manual") -> dict:
        directory = self.backup_dir()
        path = self.store.backup(directory, now, reason)
        pruned = prune_backups(directory, self.live.now.backup.keep_days, now, keep=path)
        return {"path": str(path), "pruned": len(pruned)}

    def backup_if_version_changed(self, now: float) -> dict | None:
        """At a worker's start: leftovers of a backup killed while writing are swept, then a
        full backup is written the first time this package version opens a store with data."""
        swept = self.sweep_partial_backups()
        if swept:
            log.warning("removed %d unfinished backup file(s) left by a process killed while "
                        "writing: %s", len(swept), ", ".join(swept))
        version = _version_number(__version__)
        if self.store.meta.get(meta.PACKAGE_VERSION) == version:
            return None
        report = None
        if self.store.documents.count():
            report = self.backup(now, reason="upgrade")
        self._set_meta(meta.PACKAGE_VERSION, version)
        return report

    def backup_dir(self) -> Path:
        return self.live.now.backup_dir

    def sweep_partial_backups(self) -> list[str]:
        """Remove what backups killed while writing left behind (their *.partial files);
        run at a process's start (and by every backup before it writes)."""
        return [path.name for path in sweep_partials(self.backup_dir())]

    def _set_meta(self, key: str, value: float) -> None:
        with self.store.write() as tx:
            tx.meta.put(key, value)


def _version_number(version: str) -> int:
    """'1.2.3' -> 1002003, for the integer meta table."""
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:3]] + [0, 0, 0]
    return parts[0] * 1_000_000 + parts[1] * 1_000 + parts[2]


def run_action(action: str, lifecycle: Lifecycle, reconcile_queue, now: float) -> dict:
    """One maintenance action (or all of them) by hand; {action: what it changed}."""
    if action not in ACTIONS:
        raise InvalidInput(f"action must be one of {', '.join(ACTIONS)}; got {action!r}")
    steps = {
        "decay": lambda: lifecycle.decay(now),
        "archive": lambda: lifecycle.archive(now),
        "atoms": lambda: lifecycle.sweep_atoms(now),
        "backup": lambda: lifecycle.backup(now),
        "reconcile": reconcile_queue,
    }
    chosen = list(steps) if action == "all" else [action]
    return {name: steps[name]() for name in chosen}
