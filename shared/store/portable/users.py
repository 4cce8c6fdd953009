"""Users: a name, the hash of its token, the personas it may read and write, an admin flag.

The store keeps only a token's hash (the caller hashes: shared/access.py), so a copy of the
database gives no token away. A token is looked up by its hash on every request that carries
it: no process caches a user, so a revoke (one committed row) is refused everywhere from its
commit on. A revoked user keeps its row (and its name) until the name is given again.
"""

from __future__ import annotations

import json
from typing import Any

from shared.store.model.users import UserRow
from shared.store.portable.connection import Connection

_COLUMNS = "name, personas, admin, create_time, revoke_time"


def _user(row: Any) -> UserRow:
    return UserRow(row[0], tuple(json.loads(row[1])), bool(row[2]), row[3], row[4])


def add(conn: Connection, name: str, token_hash: str, personas: tuple[str, ...],
        admin: bool, now: float) -> bool:
    """A new user; False (nothing written) when a user of that name is not revoked. A revoked
    user's name is given again: its row becomes the new user's (new token, new time)."""
    cursor = conn.execute(
        "INSERT INTO users (name, token_hash, personas, admin, create_time) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (name) DO UPDATE SET token_hash = excluded.token_hash,"
        " personas = excluded.personas, admin = excluded.admin,"
        " create_time = excluded.create_time, revoke_time = NULL"
        " WHERE users.revoke_time IS NOT NULL",
        (name, token_hash, json.dumps(list(personas), ensure_ascii=False), int(admin), now))
    return cursor.rowcount == 1


def revoke(conn: Connection, name: str, now: float) -> bool:
    """Refuse the user's token from this commit on; False when no such user is active."""
    return conn.execute("UPDATE users SET revoke_time = ? WHERE name = ? AND revoke_time IS NULL",
                        (now, name)).rowcount == 1


def by_token_hash(conn: Connection, token_hash: str) -> UserRow | None:
    """The active (not revoked) user whose token has this hash."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM users WHERE token_hash = ? AND revoke_time IS NULL",
                       (token_hash,)).fetchone()
    return None if row is None else _user(row)


def holder_of(conn: Connection, token_hash: str) -> UserRow | None:
    """The user whose token has this hash, revoked or not: a revoked user's token stays
    that user's, never taken for anyone else's."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM users WHERE token_hash = ?", (token_hash,)).fetchone()
    return None if row is None else _user(row)


def get(conn: Connection, name: str) -> UserRow | None:
    """The user of this name, revoked or not."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM users WHERE name = ?", (name,)).fetchone()
    return None if row is None else _user(row)


def all_users(conn: Connection) -> list[UserRow]:
    """Every user, revoked ones included, by name."""
    return [_user(row) for row in conn.execute(f"SELECT {_COLUMNS} FROM users ORDER BY name")]


def any_active(conn: Connection) -> bool:
    """Whether any user is active: then an HTTP front without server.token asks for a token."""
    return conn.execute("SELECT 1 FROM users WHERE revoke_time IS NULL LIMIT 1").fetchone() is not None
