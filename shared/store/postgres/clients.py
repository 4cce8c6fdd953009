"""PostgreSQL's client programs (pg_dump, pg_restore, psql) as backups and restores run them:
found on PATH, given a connection string without the password (which goes in PGPASSWORD, never
on a command line), and their failures said in one line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from shared.config import StorageConfig, secret
from shared.errors import StorageError

CLIENT_HINT = ("install PostgreSQL's client programs (pg_dump, pg_restore, psql; Debian/Ubuntu: "
               "postgresql-client) of the server's major version or newer, and put them on PATH")


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise StorageError(f"{name} is not on PATH, and backups of a store on PostgreSQL need it: {CLIENT_HINT}")
    return found


def connection(url: str, password: str) -> tuple[str, dict[str, str]]:
    """(a connection string without any password, the environment for the client programs:
    PGPASSWORD set when there is one)."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise StorageError(f"storage.url is not a valid PostgreSQL URL ({first_error(str(exc))})") from exc
    password = str(params.pop("password", None) or password)  # conninfo values are strings
    params.setdefault("application_name", "aokun-backup")
    env = dict(os.environ)
    if password:
        env["PGPASSWORD"] = password
    return make_conninfo("", **params), env


def run(argv: list[str], env: Mapping[str, str], location: str, what: str) -> None:
    """argv run to the end; a failure raised in one line (a server newer than the program, said so)."""
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode == 0:
        return
    program = Path(argv[0]).name
    mismatch = re.search(r"server version: ([\d.]+)\S*; \S+ version: ([\d.]+)", done.stderr)
    if mismatch or "version mismatch" in done.stderr:
        server, client = mismatch.groups() if mismatch else ("?", "?")
        raise StorageError(f"{program} {client} cannot {what} the PostgreSQL {server} server at {location} "
                           f"(a server version mismatch): install {program} {server.split('.')[0]} or newer "
                           "and put it first on PATH")
    raise StorageError(f"{what} failed: {program} on {location}: {first_error(done.stderr)}")


def why(done: subprocess.CompletedProcess[str]) -> str:
    """What a client program that failed said, or how it ended (a damaged archive can crash
    pg_restore without a word)."""
    program = Path(done.args[0]).name
    if done.stderr.strip():
        return first_error(done.stderr)
    if done.returncode < 0:
        return f"{program} crashed on it (signal {-done.returncode})"
    if done.returncode > 128:
        return f"{program} crashed on it (status {done.returncode})"
    return f"{program} exited with status {done.returncode}"


def first_error(text: str) -> str:
    """The first line that says what went wrong, without the program's prefix."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    chosen = next((line for line in lines if "error" in line.lower() or "fatal" in line.lower()),
                  lines[0] if lines else "no message")
    return re.sub(r"^(pg_dump|pg_restore|psql)(:[^:\s]*)*:\s*((?i:error):\s*)?", "", chosen)


def password_of(storage: StorageConfig) -> str:
    """The PostgreSQL password, from the environment variable storage.password_env names."""
    return secret("", storage.password_env)
