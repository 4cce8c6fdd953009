"""Store conformance (tests/store_conformance.py): users, their token hashes and revocation."""

from __future__ import annotations

import pytest

from store_conformance import NOW, in_threads, opened, store  # noqa: F401 (the fixtures)


@pytest.fixture(autouse=True)
def _engine_has_users(store):
    # An engine is held to this file once its store has the aggregate (the PostgreSQL store
    # gains it when shared/store/users.py is ported there).
    if not hasattr(store, "users"):
        pytest.skip(f"the {store.engine} store has no users aggregate yet")


def test_a_user_is_found_by_its_token_hash_until_revoked(store):
    assert store.users.add("alice", "hash-a", ("work", "家"), False, NOW)
    found = store.users.by_token_hash("hash-a")
    assert (found.name, found.personas, found.admin, found.create_time, found.revoked) == \
        ("alice", ("work", "家"), False, NOW, False)
    assert store.users.by_token_hash("hash-b") is None
    assert store.users.any_active()
    assert store.users.revoke("alice", NOW + 1)
    assert store.users.by_token_hash("hash-a") is None
    assert not store.users.any_active()
    held = store.users.holder_of("hash-a")  # still alice's token, revoked
    assert (held.name, held.revoked) == ("alice", True) and store.users.holder_of("hash-b") is None
    assert store.users.get("alice").revoke_time == NOW + 1
    assert not store.users.revoke("alice", NOW + 2), "a revoked user is revoked once"
    assert not store.users.revoke("nobody", NOW)


def test_an_active_name_is_taken_and_a_revoked_one_given_again(store):
    assert store.users.add("bob", "hash-1", ("b",), False, NOW)
    assert not store.users.add("bob", "hash-2", ("other",), True, NOW + 1)
    assert store.users.by_token_hash("hash-2") is None
    assert store.users.get("bob").personas == ("b",)
    store.users.revoke("bob", NOW + 2)
    assert store.users.add("bob", "hash-3", ("c",), True, NOW + 3)
    renewed = store.users.by_token_hash("hash-3")
    assert (renewed.personas, renewed.admin, renewed.create_time, renewed.revoke_time) == (("c",), True, NOW + 3, None)
    assert store.users.by_token_hash("hash-1") is None, "the old token stays refused"


def test_users_are_listed_by_name_with_no_token_in_them(store):
    store.users.add("zed", "hash-z", ("z",), False, NOW)
    store.users.add("amy", "hash-y", (), True, NOW + 1)
    store.users.revoke("zed", NOW + 2)
    listed = store.users.all_users()
    assert [(u.name, u.admin, u.revoked) for u in listed] == [("amy", True, False), ("zed", False, True)]
    assert not any("hash" in repr(u) for u in listed)
    assert store.users.get("nobody") is None


def test_users_written_in_a_transaction_are_seen_after_its_commit_only(store):
    with pytest.raises(RuntimeError):
        with store.write() as tx:
            tx.users.add("carol", "hash-c", ("c",), False, NOW)
            assert tx.users.by_token_hash("hash-c").name == "carol"
            raise RuntimeError("roll back")
    assert store.users.get("carol") is None and store.users.all_users() == []


def test_of_two_adds_of_one_name_at_once_exactly_one_wins(store):
    results = in_threads(lambda: store.users.add("dan", "hash-d1", ("d",), False, NOW),
                         lambda: store.users.add("dan", "hash-d2", ("d",), False, NOW))
    assert sorted(results) == [False, True]
    winner = "hash-d1" if results[0] else "hash-d2"
    assert store.users.by_token_hash(winner).name == "dan"
