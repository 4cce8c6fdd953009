"""Who may read and write which memories: every rule of access, in one place.

A request is made by a `Principal`: the admin (server.token, or a local front started
without AOKUN_TOKEN; every persona, and the memories without one) or a user (a token of
`aokun users add`: its personas only). The tools ask here before they read or write:
- a persona named in a call must be one the principal holds (`check_persona`);
- a memory named by id must belong to one of them (`owned_memory`), and one that does not
  is answered exactly as one that does not exist, so neither its text nor its existence
  shows;
- a read without persona_id covers the principal's personas (`read_personas`: recall runs
  once per persona and merges by score);
- a memorize without persona_id goes to the default persona (memory.default_persona; none
  by default) when the principal holds it, else to a user's one persona (`memorize_persona`);
- what covers the whole store (statistics, upkeep) is the admin's (`check_admin`).

Tokens are random (secrets.token_urlsafe(32), 256 bits) and kept only as their SHA-256: a
slow hash buys nothing against a token that cannot be guessed, and a plain hash lets a
request find its user by one indexed lookup, every time (no cache: a revoke applies at once).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from shared import memory_rules
from shared.errors import AccessDenied, InvalidInput, MemoryNotFound
from shared.store.interface import Store
from shared.store.model.users import UserRow

T = TypeVar("T")
USER_NAME = re.compile(r"[\w.-]{1,64}")


@dataclass(frozen=True)
class Principal:
    """Who makes a request: `admin` may touch everything; otherwise `personas` bound it."""

    name: str
    admin: bool
    personas: frozenset[str] = frozenset()

    def holds(self, persona_id: str | None) -> bool:
        return self.admin or (persona_id is not None and persona_id in self.personas)

    def listed(self) -> str:
        return ", ".join(sorted(self.personas)) or "none"


ADMIN = Principal("admin", admin=True)


def principal_of(user: UserRow) -> Principal:
    return Principal(user.name, user.admin, frozenset(user.personas))


# -- tokens -----------------------------------------------------------------------------------

def new_token() -> str:
    """256 random bits; never starting with "-", which a command line would read as an option
    (`aokun export --token -x...` is refused by argparse)."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def resolve_token(store: Store, token: str, admin_token: str) -> Principal | None:
    """The principal a token stands for: the admin for server.token, a user for an active
    user's token, None for anything else (a revoked token included)."""
    if admin_token and hmac.compare_digest(token.encode("utf-8", "surrogatepass"),
                                           admin_token.encode("utf-8", "surrogatepass")):
        return ADMIN
    user = store.users.by_token_hash(token_hash(token))
    return None if user is None else principal_of(user)


# -- the rules --------------------------------------------------------------------------------

def check_persona(principal: Principal, persona_id: str | None) -> None:
    """A call naming persona_id (None: memories without a persona) may go on, or AccessDenied."""
    if principal.holds(persona_id):
        return
    if persona_id is None:
        raise AccessDenied("memories without a persona_id are the admin's: name one of this "
                           f"token's personas ({principal.listed()})")
    raise AccessDenied(f"persona_id {persona_id!r}: this token may not use it (its personas: "
                       f"{principal.listed()})")


def read_personas(principal: Principal, persona_id: str | None) -> tuple[str | None, ...]:
    """The persona scopes a read covers: the one named (if held), else every one the principal
    holds, sorted; (None,) for the admin without a persona_id: no persona filter at all."""
    if persona_id is not None:
        check_persona(principal, persona_id)
        return (persona_id,)
    return (None,) if principal.admin else tuple(sorted(principal.personas))


def memorize_persona(principal: Principal, persona_id: str | None, default: str | None = None) -> str | None:
    """The persona a new memory goes to: the one named (if held); else the default persona
    (memory.default_persona; None: no persona) when the principal holds it, so one who never
    names a persona keeps every memory in one place; else a user's only persona."""
    if persona_id is None and principal.holds(default):
        persona_id = default
    if persona_id is not None or principal.admin:
        check_persona(principal, persona_id)
        return persona_id
    if len(principal.personas) == 1:
        return next(iter(principal.personas))
    raise AccessDenied("persona_id: name the persona this memory belongs to (this token's "
                       f"personas: {principal.listed()})")


def owned_memory(principal: Principal, memory_id: int, get: Callable[[int], T],
                 persona_of: Callable[[T], str | None]) -> T:
    """get(memory_id) if the principal may touch that memory. For a user, a memory of another
    persona is refused in the same words as a missing one: nothing about it shows."""
    try:
        found = get(memory_id)
    except MemoryNotFound:
        if principal.admin:
            raise
        raise _not_held(memory_id) from None
    if not principal.holds(persona_of(found)):
        raise _not_held(memory_id)
    return found


def _not_held(memory_id: int) -> AccessDenied:
    return AccessDenied(f"no memory with id {memory_id} among this token's personas")


def check_admin(principal: Principal, what: str) -> None:
    if not principal.admin:
        raise AccessDenied(f"{what} covers every persona's memories: it needs the admin token")


# -- users, as the admin CLI names them ------------------------------------------------------

def check_user_name(name: str) -> str:
    if not USER_NAME.fullmatch(name):
        raise InvalidInput(f"user name {name[:80]!r}: use 1 to 64 letters, digits, '.', '_' or '-'")
    return name


def check_personas(personas: Iterable[str], admin: bool) -> tuple[str, ...]:
    """A user's personas, each a valid persona_id, no repeats; at least one unless admin."""
    checked: list[str] = []
    for persona in personas:
        persona = persona.strip()
        try:
            memory_rules.check_field("persona_id", persona)
        except InvalidInput as exc:
            raise InvalidInput(f"--personas: {exc}") from None
        if persona not in checked:
            checked.append(persona)
    if not checked and not admin:
        raise InvalidInput("--personas: give at least one persona (a,b), or --admin for every persona")
    return tuple(checked)


# -- views of one persona at a time (the panel) ----------------------------------------------

def view_persona(principal: Principal, persona_id: str | None, default: str | None = None) -> str | None:
    """The persona a one-persona view (the panel's lists, atoms, graph) shows: the one named
    (if held); without one, everything for the admin (None) and for a user the default persona
    (memory.default_persona) if held, else its first, so a user's page never spans what a store
    filter cannot bound to its personas."""
    if persona_id or principal.admin:
        check_persona(principal, persona_id or None)
        return persona_id or None
    if not principal.personas:
        raise AccessDenied("this token holds no persona: ask the admin to give it one")
    return default if principal.holds(default) else min(principal.personas)


def shown_personas(principal: Principal, stored: Callable[[], list[str]]) -> list[str]:
    """The personas a picker offers: the store's (stored() is read only for the admin), or the
    user's own, held ones only, whether or not they have memories yet."""
    return stored() if principal.admin else sorted(principal.personas)


def hides_memory(exc: AccessDenied) -> bool:
    """Whether a refusal is owned_memory's "no such memory here" (an entry point answers it as
    a missing memory, 404), not a refusal of a persona the caller named itself."""
    return str(exc).startswith("no memory with id ")
