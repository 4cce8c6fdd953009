"""Each user to their own personas: a user's token tries every tool against another user's
persona, by persona_id and by memory id, through a real HTTP front with the official MCP
client, and nothing of the other persona is read (no text, no id, no count) or changed.
Users are made with the real `aokun users` command; a revoke stops a token on the running
front at once; tokens are shown once and stored only as hashes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from helpers import (
    all_processed,
    aokun_in_process,
    db_rows,
    free_port,
    front_in_process,
    http_server,
    run_every_stage,
    write_config,
)
from shared.access import ADMIN, Principal, memorize_persona, new_token, read_personas, view_persona
from shared.config import ALL_TOOLS, LOCAL_TOKEN_ENV
from shared.errors import AccessDenied
from users_helpers import add_user, session

ADMIN_TOKEN = "admin-secret-token"
BOB_SECRETS = ("4711", "vault", "Berlin", "green tea")  # words only Bob's memories hold
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


class Team:
    """One front, its stages run here, three principals: the admin, Alice (two personas), Bob (one)."""

    def __init__(self, config: Path, url: str, alice: str, bob: str):
        self.config, self.url, self.alice, self.bob = config, url, alice, bob
        self.bob_ids: list[int] = []
        self.alice_ids: dict[int, str] = {}


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    folder = tmp_path_factory.mktemp("team")
    config = write_config(folder, server={"token": ADMIN_TOKEN, "exposed_tools": list(ALL_TOOLS)})
    alice = add_user(config, "alice", "alice-home,alice-work")
    bob = add_user(config, "bob", "bob")
    with http_server(config, free_port()) as url:
        found = Team(config, url, alice, bob)
        _seed(found)
        run_every_stage(config)
        assert all_processed(config, 6)
        yield found


def _seed(team: Team) -> None:
    with session(team.url, ADMIN_TOKEN) as admin:
        for text in ("I prefer green tea over coffee, and the blue vault code is 4711",
                     "I am flying to Berlin next Friday to see the blue lake house",
                     "We both love the lake house"):
            team.bob_ids.append(admin.ok("memorize", {"content": text, "metadata": {"persona_id": "bob"}})["id"])
    with session(team.url, team.alice) as alice:
        for text, persona in (("I keep a blue bicycle in the garden", "alice-home"),
                              ("The blue notebook holds the quarterly plan", "alice-work"),
                              ("We both love the lake house", "alice-home")):
            memory_id = alice.ok("memorize", {"content": text, "metadata": {"persona_id": persona}})["id"]
            team.alice_ids[memory_id] = persona


def bobs_memories(team: Team) -> list[dict]:
    with session(team.url, ADMIN_TOKEN) as admin:
        return admin.ok("list_memories", {"persona_id": "bob", "limit": 100})["memories"]


def assert_nothing_of_bob(text: str, team: Team) -> None:
    for secret in BOB_SECRETS:
        assert secret not in text, f"{secret!r} of Bob's leaked: {text}"
    for memory_id in team.bob_ids:
        assert f"id {memory_id}]" not in text and f'"id":{memory_id},' not in text, text


def test_a_users_token_reads_and_changes_nothing_of_another_persona(team):
    before = bobs_memories(team)
    bob_id = team.bob_ids[0]
    own_id = next(iter(team.alice_ids))
    turns = [{"speaker": "Bob", "text": "the vault code is 4711"}]
    by_persona = {
        "memorize": {"content": "planted by alice", "metadata": {"persona_id": "bob"}},
        "summarize_memory": {"conversation": turns, "persona_id": "bob", "store": True},
        "recall": {"query": "vault code Berlin green tea", "persona_id": "bob"},
        "list_memories": {"persona_id": "bob"},
        "search_atoms": {"query": "vault code Berlin green tea", "persona_id": "bob"},
        "memory_stats": {},
        "memory_maintenance": {"action": "archive"},
    }
    by_id = {
        "edit_memory": {"id": bob_id, "content": "overwritten by alice"},
        "delete_memory": {"id": bob_id},
        "pin_memory": {"id": bob_id, "pinned": True},
    }
    assert set(by_persona) | set(by_id) == set(ALL_TOOLS), "every tool is tried"
    with session(team.url, team.alice) as alice:
        for tool, arguments in {**by_persona, **by_id}.items():
            message = alice.error(tool, arguments)
            assert_nothing_of_bob(message, team)
            assert "\n" not in message, message
        missing = max(team.bob_ids + list(team.alice_ids)) + 1000
        for tool, arguments in by_id.items():
            # A memory of another persona reads exactly as one that does not exist.
            assert alice.error(tool, arguments) == alice.error(tool, {**arguments, "id": missing}).replace(
                str(missing), str(bob_id))
        assert "may not use it" in alice.error("edit_memory", {"id": own_id, "metadata": {"persona_id": "bob"}})
        assert "name the persona" in alice.error("memorize", {"content": "whose is this?"})
    assert bobs_memories(team) == before
    assert db_rows(team.config, "SELECT COUNT(*) FROM documents WHERE persona_id = 'bob'")[0][0] == 3
    assert db_rows(team.config, "SELECT COUNT(*) FROM documents WHERE text LIKE '%alice%'") == [(0,)]


def test_reads_without_a_persona_cover_only_the_tokens_personas(team):
    with session(team.url, team.alice) as alice:
        recalled = alice.call("recall", {"query": "blue lake house vault Berlin", "k": 15, "min_score": 0})
        assert not recalled.is_error
        hits = recalled.structured_content["results"]
        assert {h["persona_id"] for h in hits} == {"alice-home", "alice-work"}, hits
        assert {h["id"] for h in hits} <= set(team.alice_ids)
        assert not set(team.bob_ids) & {d for h in hits for d in h["duplicates"]}
        assert_nothing_of_bob(recalled.content[0].text, team)
        listed = alice.ok("list_memories", {"limit": 100})
        assert listed["total"] == 3 and {m["id"] for m in listed["memories"]} == set(team.alice_ids)
        assert [m["id"] for m in alice.ok("list_memories", {"limit": 1, "offset": 1})["memories"]] == \
            [sorted(team.alice_ids, reverse=True)[1]]
        found = alice.ok("search_atoms", {"query": "blue vault lake house Berlin tea", "k": 15, "min_score": 0})
        typed = alice.ok("search_atoms", {"types": ["planned", "preference", "factual", "episodic",
                                                    "relational", "unknown"], "k": 15})
        atoms = found["atoms"] + typed["atoms"]
        assert atoms and {a["memory_id"] for a in atoms} <= set(team.alice_ids), atoms
    with session(team.url, ADMIN_TOKEN) as admin:
        everything = admin.ok("recall", {"query": "blue vault Berlin", "k": 15, "min_score": 0})["results"]
        assert {h["persona_id"] for h in everything} >= {"bob"}, "the admin's recall covers every persona"
        assert admin.ok("list_memories", {"limit": 100})["total"] == 6


def test_a_memorize_goes_to_the_tokens_one_persona(team):
    with session(team.url, team.bob) as bob:
        stored = bob.ok("memorize", {"content": "Bob's own note"})
        assert stored["persona_id"] == "bob"
        bob.ok("delete_memory", {"id": stored["id"]})
        summarized = bob.ok("summarize_memory", {"conversation": "Bob: I bought a red kayak", "store": True})
        assert summarized["persona_id"] == "bob"
        bob.ok("delete_memory", {"id": summarized["id"]})
        assert "no memory with id" in bob.error("edit_memory", {"id": next(iter(team.alice_ids)), "content": "x"})
    with session(team.url, team.alice) as alice:
        assert "name the persona" in alice.error("summarize_memory", {"conversation": "Alice: I moved to Lyon",
                                                                      "store": True})


def test_a_session_carries_no_identity_each_requests_token_counts(team):
    opened = _post(team.url, ADMIN_TOKEN, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    session_id = opened.headers["mcp-session-id"]
    _post(team.url, ADMIN_TOKEN, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session_id)
    listed = _post(team.url, team.alice, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "list_memories", "arguments": {"persona_id": "bob"}}}, session_id)
    assert listed.status_code == 200 and "may not use it" in listed.text
    assert not any(secret in listed.text for secret in BOB_SECRETS), listed.text


def _post(url: str, token: str, body: dict, session_id: str | None = None) -> httpx.Response:
    headers = {**JSON_HEADERS, "Authorization": f"Bearer {token}"}
    if session_id:
        headers["Mcp-Session-Id"] = session_id
    return httpx.post(url, headers=headers, json=body, timeout=30)


def test_a_revoked_token_is_refused_at_once_on_a_running_front(team):
    carol = add_user(team.config, "carol", "carol")
    with session(team.url, carol) as s:
        s.ok("memorize", {"content": "carol was here"})
        revoked = aokun_in_process("users", "revoke", "carol", "--config", team.config)
        assert revoked.returncode == 0, revoked.stderr
        with pytest.raises(Exception):  # noqa: B017 - however the client words a refused token
            s.ok("recall", {"query": "carol"})
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert _post(team.url, carol, ping).status_code == 401
    assert _post(team.url, "not-a-token", ping).status_code == 401
    assert _post(team.url, team.bob, ping).status_code != 401


def test_users_commands_show_a_token_once_and_store_only_its_hash(tmp_path):
    config = write_config(tmp_path)
    added = aokun_in_process("users", "add", "dora", "--personas", "d1, d2", "--config", config)
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    assert len(token) >= 40 and "\n" not in token
    assert "shown only now" in added.stderr
    listed = aokun_in_process("users", "list", "--config", config)
    assert listed.returncode == 0 and "dora" in listed.stdout and "d1,d2" in listed.stdout
    digest = hashlib.sha256(token.encode()).hexdigest()
    assert token not in listed.stdout + listed.stderr and digest not in listed.stdout
    assert db_rows(config, "SELECT token_hash FROM users WHERE name = 'dora'") == [(digest,)]
    files = [p for p in (tmp_path / "data").iterdir() if p.name.startswith("aokun.db")]
    assert files and not any(token.encode() in p.read_bytes() for p in files)
    for bad in (["add", "two words", "--personas", "x"], ["add", "eve"], ["add", "dora", "--personas", "x"],
                ["revoke", "nobody"], ["add", "eve", "--personas", ","]):
        refused = aokun_in_process("users", *bad, "--config", config)
        assert refused.returncode == 2, bad
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert aokun_in_process("users", "revoke", "dora", "--config", config).returncode == 0
    assert "revoked" in aokun_in_process("users", "revoke", "dora", "--config", config).stderr
    row = aokun_in_process("users", "list", "--config", config).stdout.splitlines()[1]
    assert row.startswith("dora") and row.rstrip().endswith("UTC") and row.count("UTC") == 2


def test_an_open_front_asks_for_a_token_once_a_user_exists(tmp_path):
    config = write_config(tmp_path)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with http_server(config, free_port()) as url:
        assert httpx.post(url, headers=JSON_HEADERS, json=ping, timeout=30).status_code != 401
        token = add_user(config, "fay", "fay")
        assert httpx.post(url, headers=JSON_HEADERS, json=ping, timeout=30).status_code == 401
        with session(url, token) as fay:
            assert fay.ok("memorize", {"content": "fay's note"})["persona_id"] == "fay"
            assert "may not use it" in fay.error("recall", {"query": "note", "persona_id": "gus"})


def test_a_local_front_is_the_admins_unless_aokun_token_names_a_user(tmp_path, monkeypatch):
    # A local front (stdio, as a host starts it) reads AOKUN_TOKEN when it is built.
    config = write_config(tmp_path, server={"exposed_tools": list(ALL_TOOLS)})
    token = add_user(config, "gus", "gus")
    monkeypatch.delenv(LOCAL_TOKEN_ENV, raising=False)
    with front_in_process(config) as admin:
        other = admin.ok("memorize", {"content": "the admin's own", "metadata": {"persona_id": "other"}})["id"]
        admin.ok("memory_stats")
    monkeypatch.setenv(LOCAL_TOKEN_ENV, token)
    with front_in_process(config) as gus:
        assert gus.ok("memorize", {"content": "gus's note"})["persona_id"] == "gus"
        assert "may not use it" in gus.error("recall", {"query": "own", "persona_id": "other"})
        assert "no memory with id" in gus.error("delete_memory", {"id": other})
        assert aokun_in_process("users", "revoke", "gus", "--config", config).returncode == 0
        assert "AOKUN_TOKEN" in gus.error("list_memories")
    monkeypatch.setenv(LOCAL_TOKEN_ENV, "")
    with front_in_process(config) as nobody:
        assert "AOKUN_TOKEN" in nobody.error("recall", {"query": "own"})


def test_the_rules_read_as_documented():
    alice = Principal("alice", admin=False, personas=frozenset({"home", "work"}))
    assert read_personas(alice, None) == ("home", "work")
    assert read_personas(alice, "work") == ("work",)
    assert read_personas(ADMIN, None) == (None,), "the admin's read has no persona filter"
    assert memorize_persona(Principal("bob", False, frozenset({"bob"})), None) == "bob"
    assert memorize_persona(ADMIN, None) is None
    for refused in (lambda: read_personas(alice, "bob"), lambda: memorize_persona(alice, None),
                    lambda: memorize_persona(alice, "bob")):
        with pytest.raises(AccessDenied):
            refused()


def test_a_write_without_a_persona_goes_to_the_default_its_writer_holds():
    """memory.default_persona: the admin's unnamed writes go there; a user's when the token
    holds it, else to its one persona (a user with several must name one); a named persona
    is still the one written, and the panel's view of a user opens on the default if held."""
    alice = Principal("alice", admin=False, personas=frozenset({"home", "work"}))
    bob = Principal("bob", False, frozenset({"bob"}))
    assert memorize_persona(ADMIN, None, "me") == "me"
    assert memorize_persona(ADMIN, "work", "me") == "work"
    assert memorize_persona(alice, None, "work") == "work"
    assert memorize_persona(alice, "home", "work") == "home"
    assert memorize_persona(bob, None, "me") == "bob"
    with pytest.raises(AccessDenied):
        memorize_persona(alice, None, "me")
    assert view_persona(alice, None, "work") == "work"
    assert view_persona(alice, None, "me") == "home"
    assert view_persona(ADMIN, None, "me") is None, "the admin's lists span every persona"


def test_a_new_token_never_reads_as_a_command_line_option():
    """`aokun export --token TOKEN` takes a token starting with "-" for an option: one token in
    64 did. A thousand tokens would hold such a one by chance almost surely."""
    tokens = {new_token() for _ in range(1000)}
    assert len(tokens) == 1000 and not any(t.startswith("-") for t in tokens)
    assert all(len(t) == 43 for t in tokens)
