"""Every tool, through the official MCP client, against the real front built in this process
(tests/process/test_tools_stdio.py: the same front as a subprocess over stdio)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from helpers import db_rows, front_in_process, write_config

ZH = "我对花生过敏，去年在杭州体检时发现的"
EN = "I am allergic to peanuts; I found out at a check-up in Hangzhou last year"
FILLER_ZH = ["我喜欢在周末去西湖边跑步", "下周三要和同事开项目评审会", "我的猫叫小白，今年三岁了"]
FILLER_EN = ["I like running along the river on weekends", "My cat is called Snow and she is three",
             "We have a project review with the team next Wednesday"]


def test_lists_the_default_tools_and_calls_only_those(tmp_path):
    with front_in_process(write_config(tmp_path)) as s:
        assert sorted(s.tool_names()) == ["edit_memory", "list_memories", "memorize", "recall"]
        assert s.error("memory_stats") == \
            'tool "memory_stats" is not enabled on this server (server.exposed_tools)'


def test_exposed_tools_follow_config(tmp_path):
    config = write_config(tmp_path, server={"exposed_tools": ["recall", "memory_stats"]})
    with front_in_process(config) as s:
        assert sorted(s.tool_names()) == ["memory_stats", "recall"]
        assert s.ok("memory_stats")["documents"]["total"] == 0
        assert s.error("memorize", {"content": "not listed"}) == \
            'tool "memorize" is not enabled on this server (server.exposed_tools)'


def test_memorize_commits_before_replying(session, config_path):
    reply = session.ok("memorize", {"content": ZH, "metadata": {
        "original_time": "2024-03-01T09:30:00", "topics": ["健康"], "importance": 0.9}})
    assert reply["status"] == "accepted" and isinstance(reply["id"], int)
    assert reply["text"] == f"[2024-03-01 09:30] {ZH}"
    # Another connection sees the document and its BM25 row as soon as the reply arrives.
    assert db_rows(config_path, "SELECT text FROM documents WHERE id = ?", (reply["id"],)) == [(reply["text"],)]
    assert db_rows(config_path, "SELECT COUNT(*) FROM documents_fts WHERE rowid = ?", (reply["id"],)) == [(1,)]


def test_memory_without_original_time_is_marked_with_its_creation_time(session):
    before = datetime.now(timezone.utc).replace(second=0, microsecond=0, tzinfo=None)
    reply = session.ok("memorize", {"content": "bought a red bicycle"})
    marker = re.fullmatch(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d)\] bought a red bicycle", reply["text"])
    assert marker, reply["text"]
    stamped = datetime.strptime(marker.group(1), "%Y-%m-%d %H:%M")
    assert before <= stamped <= before + timedelta(minutes=2)


def test_time_marker_is_not_doubled(session):
    text = "[2023-05-08 13:56] Caroline: I went to a support group yesterday"
    reply = session.ok("memorize", {"content": text, "metadata": {"original_time": "2023-05-08T13:56:00"}})
    assert reply["text"] == text


@pytest.mark.parametrize("target, query, fillers", [
    (ZH, "花生过敏", FILLER_ZH),
    (EN, "peanut allergy", FILLER_EN),
])
def test_recall_finds_the_memory_first(session, target, query, fillers):
    for text in fillers[:1]:
        session.ok("memorize", {"content": text})
    wanted = session.ok("memorize", {"content": target})["id"]
    for text in fillers[1:]:
        session.ok("memorize", {"content": text})
    results = session.ok("recall", {"query": query})["results"]
    assert results and results[0]["id"] == wanted
    assert 0 < results[0]["score"] < 1


def test_recall_returns_the_memory_text_and_its_persona_summary_apart(session):
    stored = session.ok("memorize", {"content": "Alice prefers green tea over coffee",
                                   "metadata": {"persona_summary": "Alice: drinks green tea, not coffee"}})
    plain = session.ok("memorize", {"content": "Bob drinks green tea every morning"})
    hits = {h["id"]: h for h in session.ok("recall", {"query": "green tea", "min_score": 0})["results"]}
    assert hits[stored["id"]]["text"] == stored["text"]  # the memory itself, not its summary
    assert hits[stored["id"]]["persona_summary"] == "Alice: drinks green tea, not coffee"
    assert hits[plain["id"]]["text"] == plain["text"] and hits[plain["id"]]["persona_summary"] is None


def test_persona_and_session_isolation(session):
    a = session.ok("memorize", {"content": "my favourite colour is blue",
                              "metadata": {"persona_id": "alice", "session_id": "s1"}})["id"]
    b = session.ok("memorize", {"content": "my favourite colour is red",
                              "metadata": {"persona_id": "bob", "session_id": "s2"}})["id"]

    def recalled(**scope):
        found = session.ok("recall", {"query": "favourite colour", **scope, "min_score": 0})["results"]
        return [r["id"] for r in found]

    assert recalled(persona_id="alice") == [a]
    assert recalled(persona_id="bob") == [b]
    assert recalled(session_id="s2") == [b]
    assert recalled(persona_id="carol") == []
    assert sorted(recalled()) == [a, b]
    listed = session.ok("list_memories", {"persona_id": "alice"})
    assert listed["total"] == 1 and [m["id"] for m in listed["memories"]] == [a]


def test_k_defaults_and_a_k_above_the_maximum_is_refused(session):
    for i in range(20):
        session.ok("memorize", {"content": f"note {i} about the garden"})
    assert len(session.ok("recall", {"query": "garden", "min_score": 0})["results"]) == 5
    assert session.error("recall", {"query": "garden", "k": 100}) == "k: must be between 1 and 15 (got 100)"
    assert len(session.ok("recall", {"query": "garden", "k": 15, "min_score": 0})["results"]) == 15
    assert len(session.ok("recall", {"query": "garden", "k": 2, "min_score": 0})["results"]) == 2


def test_list_memories_newest_first_with_paging(session):
    ids = [session.ok("memorize", {"content": f"memory number {i}"})["id"] for i in range(5)]
    page = session.ok("list_memories", {"limit": 2, "offset": 1})
    assert page["total"] == 5
    assert [m["id"] for m in page["memories"]] == [ids[3], ids[2]]


def test_edit_then_recall_sees_new_text_only(session):
    mid = session.ok("memorize", {"content": "I live in Beijing", "metadata": {"topics": ["home"]}})["id"]
    edited = session.ok("edit_memory", {"id": mid, "content": "I live in Shanghai now",
                                      "metadata": {"importance": 0.8}})
    # No original_time: the marker is the creation time, kept through the edit.
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d\] I live in Shanghai now", edited["memory"]["text"])
    assert edited["memory"]["topics"] == ["home"] and edited["memory"]["importance"] == 0.8
    assert [r["id"] for r in session.ok("recall", {"query": "Shanghai", "min_score": 0})["results"]] == [mid]
    assert session.ok("recall", {"query": "Beijing", "min_score": 0})["results"] == []


def test_pin_memory(session):
    mid = session.ok("memorize", {"content": "the wifi password is on the fridge"})["id"]
    assert session.ok("pin_memory", {"id": mid}) == {"id": mid, "pinned": True}
    assert session.ok("memory_stats")["documents"]["pinned"] == 1
    assert session.ok("pin_memory", {"id": mid, "pinned": False}) == {"id": mid, "pinned": False}


def test_delete_leaves_no_row_behind(session, config_path):
    mid = session.ok("memorize", {"content": "Alice and Bob work together at Acme"})["id"]
    keep = session.ok("memorize", {"content": "unrelated memory that stays"})["id"]
    _derive_rows(config_path, mid)
    receipt = session.ok("delete_memory", {"id": mid})
    assert receipt["removed"] == {
        "documents": 1, "documents_fts": 1, "memory_stages": 3, "memory_atoms": 1, "atoms_fts": 1,
        "graph_nodes": 2, "graph_edges": 1, "graph_entries": 1, "graph_entries_fts": 1, "vectors": 2}
    for table, column in [("documents", "id"), ("documents_fts", "rowid"), ("memory_stages", "memory_id"),
                          ("memory_atoms", "memory_id"), ("graph_edges", "source_memory_id"),
                          ("graph_entries", "source_memory_id"), ("vectors", "memory_id")]:
        assert db_rows(config_path, f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", (mid,)) == [(0,)], table
    for table in ("atoms_fts", "graph_entries_fts", "graph_nodes"):
        assert db_rows(config_path, f"SELECT COUNT(*) FROM {table}") == [(0,)], table
    stats = session.ok("memory_stats")
    assert stats["documents"]["total"] == 1 and stats["tables"]["documents_fts"] == 1
    assert [m["id"] for m in session.ok("list_memories")["memories"]] == [keep]
    assert "no memory with id" in session.error("delete_memory", {"id": mid})


def _derive_rows(config_path, mid: int) -> None:
    """Write the rows later stages derive from a memory, straight into the tables."""
    import sqlite3

    conn = sqlite3.connect(config_path.parent / "data" / "aokun.db")
    with conn:
        assert conn.execute("SELECT COUNT(*) FROM memory_stages WHERE memory_id = ?", (mid,)).fetchone() == (3,)
        atom = conn.execute("INSERT INTO memory_atoms (memory_id, type, text, create_time, update_time)"
                            " VALUES (?, 'relational', 'Alice works with Bob', 0, 0)", (mid,)).lastrowid
        conn.execute("INSERT INTO atoms_fts (rowid, tokens) VALUES (?, 'alice work bob')", (atom,))
        n1 = conn.execute("INSERT INTO graph_nodes (key, type, value, canonical, create_time)"
                          " VALUES ('person:Alice:alice', 'person', 'Alice', 'alice', 0)").lastrowid
        n2 = conn.execute("INSERT INTO graph_nodes (key, type, value, canonical, create_time)"
                          " VALUES ('person:Bob:bob', 'person', 'Bob', 'bob', 0)").lastrowid
        conn.execute("INSERT INTO graph_edges (source_memory_id, src_node_id, dst_node_id, type, create_time)"
                     " VALUES (?, ?, ?, 'co_occurs_with', 0)", (mid, n1, n2))
        entry = conn.execute("INSERT INTO graph_entries (source_memory_id, text, create_time)"
                             " VALUES (?, 'Fact: Alice works with Bob', 0)", (mid,)).lastrowid
        conn.execute("INSERT INTO graph_entries_fts (rowid, tokens) VALUES (?, 'alice work bob')", (entry,))
        for kind, owner in (("document", mid), ("graph_entry", entry)):
            conn.execute("INSERT INTO vectors (kind, owner_id, memory_id, model, dim, vector, content_hash,"
                         " seq, create_time) VALUES (?, ?, ?, 'm', 1, x'00000000', 'h', 0, 0)", (kind, owner, mid))
    conn.close()


def test_long_query_is_answered(session):
    mid = session.ok("memorize", {"content": "the spare key is under the blue flowerpot"})["id"]
    query = ("where did I leave the spare key? " * 400)[:10_000]
    assert session.ok("recall", {"query": query, "min_score": 0})["results"][0]["id"] == mid
