"""`aokun users add|list|revoke`: who may use the server, and with which personas.

A user is a token allowed to read and write its personas only (or, with --admin, every
persona); the rules are shared/access.py's. The token is printed once, when the user is
added: the store keeps only its hash, so a lost token is replaced by revoking the user and
adding it again.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone

from shared.access import check_personas, check_user_name, new_token, token_hash
from shared.errors import InvalidInput


def add_parser(commands, with_config) -> None:
    """`aokun users` and its three subcommands, on the admin CLI's subparsers."""
    users = with_config(commands.add_parser(
        "users", help="add, list and revoke users: tokens that may use only their own personas"))
    actions = users.add_subparsers(dest="users_action", required=True, metavar="ACTION")
    add = with_config(actions.add_parser(
        "add", help="add a user and print its token (shown only this once)",
        description="Add a user and print its token, shown only this once."))
    add.add_argument("name", help="the user's name: letters, digits, '.', '_' or '-'")
    add.add_argument("--personas", default="",
                     help="the personas the token may read and write, comma-separated (a,b)")
    add.add_argument("--admin", action="store_true",
                     help="the token may read and write every persona (and run upkeep and stats)")
    with_config(actions.add_parser(
        "list", help="list users: name, personas, admin, created, revoked (never tokens)",
        description="List users: name, personas, admin, created, revoked (never tokens)."))
    revoke = with_config(actions.add_parser(
        "revoke", help="refuse a user's token from now on, in every running front",
        description="Refuse a user's token from now on, in every running front."))
    revoke.add_argument("name")


def cmd_users(admin, args) -> int:
    return {"add": _add, "list": _list, "revoke": _revoke}[args.users_action](admin.store, args)


def _add(store, args) -> int:
    name = check_user_name(args.name)
    personas = check_personas(args.personas.split(",") if args.personas.strip() else [], args.admin)
    token = new_token()
    if not store.users.add(name, token_hash(token), personas, args.admin, time.time()):
        raise InvalidInput(f"user {name!r} exists; revoke it first to give the name a new token")
    scope = "every persona (admin)" if args.admin else "personas " + ", ".join(personas)
    print(f"added user {name}: {scope}", file=sys.stderr)
    print("its token is shown only now, never again (the store keeps only its hash):", file=sys.stderr)
    print(token)
    return 0


def _list(store, args) -> int:
    rows = store.users.all_users()
    if not rows:
        print("no users (server.token alone is the admin's token)")
        return 0
    table = [("name", "personas", "admin", "created", "revoked")]
    table += [(u.name, ",".join(u.personas) or "-", "yes" if u.admin else "no", _when(u.create_time),
               _when(u.revoke_time) if u.revoked else "-") for u in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return 0


def _revoke(store, args) -> int:
    name = check_user_name(args.name)
    if store.users.revoke(name, time.time()):
        print(f"revoked user {name}: its token is refused from now on")
        return 0
    found = store.users.get(name)
    raise InvalidInput(f"user {name!r} is already revoked" if found else f"no user {name!r}")


def _when(moment: float | None) -> str:
    return "-" if moment is None else datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
