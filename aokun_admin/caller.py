"""Who runs an admin command that reads the store for someone (`aokun hook`): the principal
(shared/access.py) whose personas bound what it prints, decided as a front decides it.

The caller's token is AOKUN_TOKEN when the environment holds one (even empty: a bad token
refuses, never falls back), else the config's server.token, which a user's own config holds
as the token its hook and host send to a front. A token is looked up among the store's users
first: an active user's is that user, a revoked user's is refused (a user's token never
becomes the admin's, even where a config gives it as server.token too). Any other token is
the admin's when it is this config's server.token, as a front started on this config takes
it (with a front running, the front has the last word: it refuses a token it does not know),
and refused when it came in AOKUN_TOKEN. Without a token the caller is the admin while the
store has no active user (one person's local store), and refused once it has: an HTTP front
refuses a request without a token then.

A refusal is AccessDenied with one line saying why; the command prints nothing else.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from shared.config import LOCAL_TOKEN_ENV, AppConfig
from shared.errors import AccessDenied

if TYPE_CHECKING:
    from shared.access import Principal
    from shared.store.interface import Store

# Lazy imports: the access rules (and the store's types under them) only where a token is
# resolved against the store; `aokun hook` takes caller_token alone when a front answers.


def caller_token(config: AppConfig, env: Mapping[str, str] = os.environ) -> tuple[str | None, str]:
    """(the caller's token or None, where it came from: AOKUN_TOKEN or server.token)."""
    if LOCAL_TOKEN_ENV in env:
        return env[LOCAL_TOKEN_ENV], LOCAL_TOKEN_ENV
    return (config.server.token or None), "server.token"


def caller(store: Store, config: AppConfig, env: Mapping[str, str] = os.environ) -> Principal:
    """The principal this command runs as, looked up now (a revoke applies at once)."""
    from shared.access import ADMIN

    token, source = caller_token(config, env)
    if token is None:
        if store.users.any_active():
            raise AccessDenied(f"this store has users: give a user's token in {LOCAL_TOKEN_ENV} or as "
                               "server.token in the config")
        return ADMIN
    return token_principal(store, token, source, config.server.token)


def token_principal(store: Store, token: str, source: str, admin_token: str) -> Principal:
    """The principal of a token given in `source` (named in the refusal): an active user's
    token is that user, the admin's server.token the admin; anything else is refused."""
    from shared.access import ADMIN, principal_of, token_hash

    holder = store.users.holder_of(token_hash(token)) if token else None
    if holder is not None and not holder.revoked:
        return principal_of(holder)
    if holder is None and token and admin_token and hmac.compare_digest(
            token.encode("utf-8", "surrogatepass"), admin_token.encode("utf-8", "surrogatepass")):
        return ADMIN
    raise AccessDenied(f"{source} holds no valid token (revoked, or never issued): "
                       "ask the admin for one (aokun users add)")
