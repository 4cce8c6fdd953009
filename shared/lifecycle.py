"""Forgetting and upkeep: importance decay, archival, the atom sweep and backups.

Each job takes `now` (tests inject it, nothing waits) and returns what it changed. Workers run
them on schedule through their periodic jobs; memory_maintenance and `aokun maintenance` run
them by hand.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from shared import __version__
from shared.config import AppConfig
from shared.decay import DAY
from shared.extract.graph_rules import canonical
from shared.store import atoms, graph
from shared.store.db import Database
from shared.store.documents import DocumentStore

ACTIONS = ("decay", "archive", "atoms", "backup", "reconcile", "all")
DECAY_KEY = "decay_applied_at"
VERSION_KEY = "package_version"


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


@dataclass
class Lifecycle:
    config: AppConfig
    db: Database
    documents: DocumentStore

    def decay(self, now: float) -> dict:
        """Apply every daily decay due since the last one (catching up after downtime)."""
        f = self.config.forgetting
        previous = self._meta(DECAY_KEY)
        if previous is None:  # a new store: start counting from the last decay time
            self._set_meta(DECAY_KEY, (decay_boundaries(now - DAY, now, f.decay_hour, f.decay_minute)
                                       or [now])[-1])
            return {"days": 0, "memories": 0}
        due = decay_boundaries(previous, now, f.decay_hour, f.decay_minute)
        changed = self.documents.decay_importance(
            len(due), f.decay_rate, f.access_decay_window_days * DAY,
            f.access_count_decay_multiplier, now)
        if due:
            self._set_meta(DECAY_KEY, due[-1])
        return {"days": len(due), "memories": changed}

    def archive(self, now: float) -> dict:
        f = self.config.forgetting
        if not f.auto_cleanup_enabled:
            return {"archived": 0, "enabled": False}
        ids = self.documents.archive_stale(now - f.cleanup_days_threshold * DAY,
                                           f.cleanup_importance_threshold)
        return {"archived": len(ids), "ids": ids[:100]}

    def sweep_atoms(self, now: float) -> dict:
        """active -> expired -> forgotten -> purged (with graph output), each after its delay."""
        f = self.config.forgetting
        with self.db.write() as tx:
            expired = atoms.expire(tx, now)
            forgotten = atoms.forget(tx, now - f.atom_forget_delay_days * DAY, now)
            purged = atoms.purge(tx, now - f.atom_purge_delay_days * DAY, now)
            removed = {"graph_entries": 0, "graph_edges": 0}
            for row in purged:
                for key, count in graph.delete_fact(tx, row["memory_id"], canonical(row["text"][:120], {}), now).items():
                    removed[key] += count
        return {"expired": len(expired), "forgotten": len(forgotten), "purged": len(purged), **removed}

    def backup(self, now: float, reason: str = "manual") -> dict:
        from shared.backup import backup_database, prune_backups

        directory = self.backup_dir()
        path = backup_database(self.db, directory, now, reason)
        pruned = prune_backups(directory, self.config.backup.keep_days, now, keep=path)
        return {"path": str(path), "pruned": len(pruned)}

    def backup_if_version_changed(self, now: float) -> dict | None:
        """A full backup the first time this package version opens a store with data in it."""
        stored = self.db.connection().execute("SELECT value FROM meta WHERE key = ?", (VERSION_KEY,)).fetchone()
        version = _version_number(__version__)
        if stored is not None and stored[0] == version:
            return None
        report = None
        if self.documents.stats()["total"]:
            report = self.backup(now, reason="upgrade")
        self._set_meta(VERSION_KEY, version)
        return report

    def backup_dir(self) -> Path:
        return self.config.backup.dir or self.config.storage.data_dir / "backups"

    def _meta(self, key: str) -> float | None:
        row = self.db.connection().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else float(row[0])

    def _set_meta(self, key: str, value: float) -> None:
        with self.db.write() as tx:
            tx.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE"
                       " SET value = excluded.value", (key, value))


def _version_number(version: str) -> int:
    """'1.2.3' -> 1002003, for the integer meta table."""
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:3]] + [0, 0, 0]
    return parts[0] * 1_000_000 + parts[1] * 1_000 + parts[2]


def run_action(action: str, lifecycle: Lifecycle, reconcile_queue, now: float) -> dict:
    """One maintenance action (or all of them) by hand; {action: what it changed}."""
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}; got {action!r}")
    steps = {
        "decay": lambda: lifecycle.decay(now),
        "archive": lambda: lifecycle.archive(now),
        "atoms": lambda: lifecycle.sweep_atoms(now),
        "backup": lambda: lifecycle.backup(now),
        "reconcile": reconcile_queue,
    }
    chosen = list(steps) if action == "all" else [action]
    return {name: steps[name]() for name in chosen}
