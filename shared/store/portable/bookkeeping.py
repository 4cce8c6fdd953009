"""The store's bookkeeping aggregates both engines share: meta values, the processes' rows,
summarizer usage and users. As in aggregates.py, one explicit line per method hands the
module function (shared/store/portable/<aggregate>.py) to the session's runner."""

from __future__ import annotations

from typing import Any

from shared.store.model.runtime import ProcessRow
from shared.store.model.users import UserRow
from shared.store.portable import meta, runtime, usage, users
from shared.store.portable.aggregates import Aggregate


class PortableMeta(Aggregate):
    def get(self, key: str) -> float | None:
        return self._run.read(meta.get, key)

    def put(self, key: str, value: float) -> None:
        return self._run.write(meta.put, key, value)

    def recall_epoch(self) -> int:
        return self._run.read(meta.recall_epoch)

    def store_id(self) -> int | None:
        return self._run.read(meta.store_id)


class PortableRuntime(Aggregate):
    def beat(self, worker_id: str, pid: int, hostname: str, now: float) -> None:
        return self._run.write(runtime.beat, worker_id, pid, hostname, now)

    def mark_autostarted(self, worker_id: str) -> None:
        return self._run.write(runtime.mark_autostarted, worker_id)

    def mark_stopping(self, worker_id: str) -> None:
        return self._run.write(runtime.mark_stopping, worker_id)

    def remove_worker(self, worker_id: str) -> None:
        return self._run.write(runtime.remove_worker, worker_id)

    def prune_workers(self, dead_before: float) -> int:
        return self._run.write(runtime.prune_workers, dead_before)

    def worker_rows(self) -> list[ProcessRow]:
        return self._run.read(runtime.worker_rows)

    def live_workers(self, alive_since: float) -> list[str]:
        return self._run.read(runtime.live_workers, alive_since)

    def newest_heartbeat(self) -> float | None:
        return self._run.read(runtime.newest_heartbeat)

    def last_worker_gone(self) -> float | None:
        return self._run.read(runtime.last_worker_gone)

    def front_beat(self, front_id: str, pid: int, hostname: str, transport: str, now: float,
                   endpoint: str | None = None) -> None:
        return self._run.write(runtime.front_beat, front_id, pid, hostname, transport, now, endpoint)

    def remove_front(self, front_id: str) -> None:
        return self._run.write(runtime.remove_front, front_id)

    def prune_fronts(self, dead_before: float) -> int:
        return self._run.write(runtime.prune_fronts, dead_before)

    def front_rows(self) -> list[ProcessRow]:
        return self._run.read(runtime.front_rows)

    def live_fronts(self, alive_since: float) -> list[ProcessRow]:
        return self._run.read(runtime.live_fronts, alive_since)

    def claim_periodic_run(self, name: str, interval_s: float, now: float, owner: str, pid: int,
                           hostname: str, lease_s: float) -> tuple[bool, float | None]:
        return self._run.write(runtime.claim_periodic_run, name, interval_s, now, owner, pid,
                               hostname, lease_s)

    def finish_periodic_run(self, name: str, owner: str, started: float) -> None:
        return self._run.write(runtime.finish_periodic_run, name, owner, started)

    def renew_periodic_claim(self, name: str, owner: str, lease_until: float) -> bool:
        return self._run.write(runtime.renew_periodic_claim, name, owner, lease_until)

    def release_periodic_run(self, name: str, owner: str) -> None:
        return self._run.write(runtime.release_periodic_run, name, owner)

    def periodic_claims(self) -> dict[str, str]:
        return self._run.read(runtime.periodic_claims)

    def periodic_runs(self) -> dict[str, float]:
        return self._run.read(runtime.periodic_runs)


class PortableUsage(Aggregate):
    def record(self, model: str, prompt_tokens: int, completion_tokens: int, failed: bool, now: float) -> None:
        return self._run.write(usage.record, model, prompt_tokens, completion_tokens, failed, now)

    def figures(self) -> dict[str, dict[str, Any]]:
        return self._run.read(usage.figures)


class PortableUsers(Aggregate):
    def add(self, name: str, token_hash: str, personas: tuple[str, ...], admin: bool, now: float) -> bool:
        return self._run.write(users.add, name, token_hash, personas, admin, now)

    def revoke(self, name: str, now: float) -> bool:
        return self._run.write(users.revoke, name, now)

    def by_token_hash(self, token_hash: str) -> UserRow | None:
        return self._run.read(users.by_token_hash, token_hash)

    def holder_of(self, token_hash: str) -> UserRow | None:
        return self._run.read(users.holder_of, token_hash)

    def get(self, name: str) -> UserRow | None:
        return self._run.read(users.get, name)

    def all_users(self) -> list[UserRow]:
        return self._run.read(users.all_users)

    def any_active(self) -> bool:
        return self._run.read(users.any_active)
