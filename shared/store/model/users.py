"""A user as the users table describes it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UserRow:
    """A user as the store hands it out: never its token or the token's hash."""

    name: str
    personas: tuple[str, ...]
    admin: bool
    create_time: float
    revoke_time: float | None = None

    @property
    def revoked(self) -> bool:
        return self.revoke_time is not None
