"""Who makes each tool call: the principal (shared/access.py) the tools check access against.

Over HTTP the gate (http.py) finds each request's principal from its bearer token and sets it
for that request; the SDK carries the request's context into the tool call it holds. A front
whose calls come through the gate (`gated`) refuses a call that arrives without one, so a
context that failed to arrive can never fall back to the admin.

A local front (stdio, or one built in-process) serves the one host that started it: it is the
admin's, unless AOKUN_TOKEN holds a token, which is then looked up at every call (a revoke
applies at once; a bad or empty token refuses every call, never falls back to the admin).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from shared.access import ADMIN, Principal, resolve_token, token_hash
from shared.config import LOCAL_TOKEN_ENV
from shared.errors import AccessDenied
from shared.store.interface import Store

SEND_TOKEN = "send your token as 'Authorization: Bearer <token>'"

_REQUEST_PRINCIPAL: ContextVar[Principal | None] = ContextVar("aokun_principal", default=None)


class Identity:
    """The principal of the call being served (`current`) and of an HTTP request (`of_request`).
    `admin_token` is server.token as the front started with it (a change needs a restart)."""

    def __init__(self, store: Store, admin_token: str, local_token: str | None):
        self.store = store
        self.admin_token = admin_token
        self.local_token = local_token
        self.gated = False

    @classmethod
    def from_environment(cls, store: Store, admin_token: str) -> Identity:
        return cls(store, admin_token, os.environ.get(LOCAL_TOKEN_ENV))

    def current(self) -> Principal:
        found = _REQUEST_PRINCIPAL.get()
        if found is not None:
            return found
        if self.gated:
            raise AccessDenied("this call came without a checked token; send the request again")
        return self._local()

    def _local(self) -> Principal:
        if self.local_token is None:
            return ADMIN
        found = resolve_token(self.store, self.local_token, self.admin_token)
        if found is None:
            raise AccessDenied(f"{LOCAL_TOKEN_ENV} holds no valid token (revoked, or never issued): "
                               "ask the admin for one (aokun users add)")
        return found

    def of_request(self, authorization: bytes | None) -> Principal:
        """The principal of an HTTP request by its Authorization header, or AccessDenied saying
        why it is refused. Without a header only an open front (no server.token, no active
        user) serves it. The scheme is case-insensitive (RFC 7235)."""
        if authorization is None:
            if self.admin_token or self.store.users.any_active():
                raise AccessDenied(SEND_TOKEN)
            return ADMIN
        try:
            scheme, _, token = authorization.decode("utf-8").partition(" ")
        except UnicodeDecodeError:
            raise AccessDenied(SEND_TOKEN) from None
        token = token.strip(" ")
        if scheme.lower() != "bearer" or not token:
            raise AccessDenied(SEND_TOKEN)
        found = resolve_token(self.store, token, self.admin_token)
        if found is not None:
            return found
        holder = self.store.users.holder_of(token_hash(token))
        if holder is not None and holder.revoked:
            raise AccessDenied("this token was revoked: ask the admin for a new one (aokun users add)")
        raise AccessDenied("this token is not valid here: " + SEND_TOKEN)


@contextmanager
def requested_by(principal: Principal) -> Iterator[None]:
    """Serve what runs inside (an HTTP request, and the tool calls it carries) as principal."""
    token = _REQUEST_PRINCIPAL.set(principal)
    try:
        yield
    finally:
        _REQUEST_PRINCIPAL.reset(token)
