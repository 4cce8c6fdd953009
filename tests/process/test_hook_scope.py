"""`aokun hook` keeps the caller's scope on every path: with a user's token (server.token in
the user's own config, or AOKUN_TOKEN) it prints that user's personas only, whether a running
HTTP front answers or the hook reads the store itself; a persona the token lacks, a revoked or
unknown token, and a front that refuses print nothing and one line on stderr, the same way on
both paths. The real `aokun` command (its main(), run in this process with the environment a
host gives it) and real HTTP fronts, on SQLite and on PostgreSQL; users made with the real
`aokun users` command. No other user's memory and no memory of the admin's may show
on stdout or stderr, in any case.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import psycopg
import pytest

from helpers import aokun_in_process, db_rows, free_port, http_server, wait_for, write_config
from servers import pg_url  # noqa: F401 (the fixture)
from shared.assembly import open_services
from shared.config import load_config
from shared.store.model.documents import MemoryFields

ADMIN_TOKEN = "the-admins-own-token"
# (text, persona, pinned); every text holds "blue", so one query finds them all.
MEMORIES = (
    ("Bob's blue vault code is 4711", "bob", False),
    ("Bob flies to Berlin next Friday to see the blue lake house", "bob", True),
    ("The admin's blue folder holds a private salary note", None, True),
    ("Carol writes her blue diary every night", "carol", True),
    ("Alice keeps a blue bicycle in the garden", "alice-home", True),
    ("Alice's blue notebook holds the quarterly plan", "alice-work", False),
)
NOT_ALICES = ("4711", "Berlin", "salary", "diary")  # words only others' memories hold
QUERY = "blue vault Berlin salary diary bicycle notebook"


def aokun(config: Path, *args: str) -> subprocess.CompletedProcess:
    return aokun_in_process(*args, "--config", config, env=_env({}))


def _env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("AOKUN_CONFIG", "AOKUN_TOKEN", "AOKUN_SERVER_TOKEN")}
    return {**env, **extra}


def hook(config: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess:
    """The real hook, plain form, on an empty stdin; `token` in AOKUN_TOKEN when given."""
    return aokun_in_process("hook", *args, "--config", config,
                            env=_env({} if token is None else {"AOKUN_TOKEN": token}))


def recall(config: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess:
    return hook(config, "prompt", QUERY, "--min-score", "0", "--k", "10", *args, token=token)


def leaks_nothing(done: subprocess.CompletedProcess) -> None:
    for word in NOT_ALICES:
        assert word not in done.stdout and word not in done.stderr, (word, done.stdout, done.stderr)


def refused(done: subprocess.CompletedProcess) -> str:
    """Exit 0, nothing on stdout, one line on stderr (returned)."""
    leaks_nothing(done)
    assert done.returncode == 0 and done.stdout == "", done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("aokun hook: "), done.stderr
    return lines[0]


def alices_only(done: subprocess.CompletedProcess, *expected: str) -> None:
    leaks_nothing(done)
    assert done.returncode == 0, done.stderr
    for word in expected:
        assert word in done.stdout, (word, done.stdout, done.stderr)


class Team:
    """A store with the admin's memories and three users' (Carol's token revoked), the
    admin's config and Alice's own (her token as server.token, the same store)."""

    def __init__(self, folder: Path, storage: dict):
        self.admin = write_config(folder, storage=storage, server={"token": ADMIN_TOKEN})
        self.alice_token = self.add_user("alice", "alice-home,alice-work")
        self.bob_token = self.add_user("bob", "bob")
        self.carol_token = self.add_user("carol", "carol")
        assert aokun(self.admin, "users", "revoke", "carol").returncode == 0
        self.alice = self.user_config(folder / "alice", storage, self.alice_token)
        self.carol = self.user_config(folder / "carol", storage, self.carol_token)
        self.tokenless = self.user_config(folder / "tokenless", storage, None)
        services = open_services(load_config(self.admin), queued=False)
        try:
            for text, persona, pinned in MEMORIES:
                services.memories.memorize(text, MemoryFields(persona_id=persona, pinned=pinned))
        finally:
            services.close()

    def add_user(self, name: str, personas: str) -> str:
        done = aokun(self.admin, "users", "add", name, "--personas", personas)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def user_config(self, folder: Path, storage: dict, token: str | None) -> Path:
        folder.mkdir()
        return write_config(folder, storage=storage, server={"token": token} if token else {})


def pg_rows(url: str, sql: str) -> list[tuple]:
    with psycopg.connect(url, connect_timeout=5) as conn:
        return conn.execute(sql).fetchall()


def sqlite_storage(folder: Path) -> dict:
    return {"data_dir": str(folder / "data")}


def every_path_keeps_alices_scope(team: Team) -> dict[str, str]:
    """What must hold with a front and without; the refusals' lines, to compare the paths."""
    by_config = recall(team.alice)
    alices_only(by_config, "bicycle", "notebook")  # both her personas, merged by score
    # AOKUN_TOKEN comes first, also beside the admin's server.token in the config.
    alices_only(recall(team.admin, token=team.alice_token), "bicycle", "notebook")
    work = recall(team.alice, "--persona", "alice-work")
    alices_only(work, "notebook")
    assert "bicycle" not in work.stdout
    lines = {
        "other persona": refused(recall(team.alice, "--persona", "bob")),
        "other persona, env": refused(recall(team.admin, "--persona", "bob", token=team.alice_token)),
        "revoked": refused(recall(team.carol)),
        "revoked, env": refused(recall(team.admin, token=team.carol_token)),
        "unknown, env": refused(recall(team.alice, token="never-issued-token")),
        "empty, env": refused(recall(team.alice, token="")),
        "no token": refused(recall(team.tokenless)),
        "profile, other persona": refused(hook(team.alice, "session-start", "--persona", "bob")),
        "profile, revoked": refused(hook(team.carol, "session-start")),
    }
    assert "persona_id 'bob': this token may not use it" in lines["other persona"]
    assert "server.token holds no valid token (revoked" in lines["revoked"]
    assert "AOKUN_TOKEN holds no valid token (revoked" in lines["unknown, env"]
    assert "this store has users" in lines["no token"]
    profile = hook(team.alice, "session-start")
    alices_only(profile, "bicycle")  # her pinned memory; nobody else's
    assert profile.stdout.startswith("What Aokun remembers about the user:\nPinned:\n")
    admins = recall(team.admin)  # the admin's own token still reads every persona
    assert all(word in admins.stdout for word in ("4711", "salary", "diary", "bicycle")), admins.stdout
    return lines


def test_a_users_token_keeps_its_scope_with_and_without_a_front_on_sqlite(tmp_path):
    port = free_port()
    team = Team(tmp_path, sqlite_storage(tmp_path))
    without_front = every_path_keeps_alices_scope(team)
    with http_server(team.admin, port) as url:
        wait_for(lambda: db_rows(team.admin, "SELECT endpoint FROM fronts") == [(url,)], 30,
                 what="the front's heartbeat")
        through_front = recall(team.alice, "--verbose")
        alices_only(through_front, "bicycle", "notebook")
        assert f"from the front at {url}" in through_front.stderr, through_front.stderr
        with_front = every_path_keeps_alices_scope(team)
    assert with_front == without_front  # refused in the same words on both paths


def test_a_front_that_refuses_is_not_answered_from_the_store(tmp_path):
    """The running front took the admin's token at its start; the config has since been given
    another one (server.token takes effect at a restart). The hook's own check finds the new
    token the admin's, the front refuses it: nothing is printed, the store is not read."""
    port = free_port()
    team = Team(tmp_path, sqlite_storage(tmp_path))
    with http_server(team.admin, port) as url:
        wait_for(lambda: db_rows(team.admin, "SELECT endpoint FROM fronts") == [(url,)], 30,
                 what="the front's heartbeat")
        changed = write_config(tmp_path / "alice", storage=sqlite_storage(tmp_path),
                               server={"token": "saved-since-the-start"})
        line = refused(recall(changed))
        assert "HTTP 401 from the front" in line, line
        assert "the front" in refused(hook(changed, "prompt", QUERY, "--persona", "bob"))
        # Read without the front: the new token is this config's own, the admin's.
        assert "salary" in recall(changed, "--no-front").stdout


@pytest.mark.slow
def test_a_users_token_keeps_its_scope_on_postgresql(tmp_path, pg_url):
    team = Team(tmp_path, {"backend": "postgresql", "url": pg_url, "data_dir": "data"})
    without_front = every_path_keeps_alices_scope(team)
    port = free_port()
    with http_server(team.admin, port) as url:
        wait_for(lambda: pg_rows(pg_url, "SELECT endpoint FROM fronts") == [(url,)], 30,
                 what="the front's heartbeat")
        through_front = recall(team.alice, "--verbose")
        alices_only(through_front, "bicycle", "notebook")
        assert f"from the front at {url}" in through_front.stderr, through_front.stderr
        assert every_path_keeps_alices_scope(team) == without_front


def test_export_with_a_users_token_that_is_also_the_configs_server_token(tmp_path):
    """Alice's own config gives her token as server.token, and her shell holds it in
    AOKUN_TOKEN too: the export is hers (a user's token is never taken for the admin's)."""
    team = Team(tmp_path, sqlite_storage(tmp_path))
    out = tmp_path / "alice.jsonl"
    done = aokun_in_process("export", out, "--config", team.alice, env=_env({"AOKUN_TOKEN": team.alice_token}))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {row["persona_id"] for row in rows if "persona_id" in row} == {"alice-home", "alice-work"}
    exported = out.read_text(encoding="utf-8")
    assert "bicycle" in exported and "notebook" in exported
    assert not any(word in exported for word in NOT_ALICES), exported
    revoked = aokun_in_process("export", tmp_path / "carol.jsonl", "--config", team.carol,
                               "--token", team.carol_token, env=_env({}))
    assert revoked.returncode != 0 and "holds no valid token" in revoked.stderr
    assert not (tmp_path / "carol.jsonl").exists() or "diary" not in (tmp_path / "carol.jsonl").read_text()
