"""Long memories through real processes: an aokun-server over stdio (the official client) and a
real aokun-worker with the default local embedder. A fact late in a long memory is found by
meaning, and an edit and a delete replace every passage vector the worker wrote."""

from __future__ import annotations

import pytest

from helpers import db_rows, mcp_session, start_worker, stdio_params, stop, wait_for, write_config
from long_memories import DEEP, long_text, passage_owners

SETTINGS = {"retrieval": {"channels": ["vector"]},
            "server": {"exposed_tools": ["memorize", "recall", "edit_memory", "delete_memory"]}}


def settled(config, memory_id: int) -> bool:
    """Every stage of every memory done, and the memory's vectors of its current version."""
    waiting = db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE status != 'done'")[0][0]
    stale = db_rows(config, "SELECT COUNT(*) FROM vectors WHERE memory_id = ? AND content_hash !="
                    " (SELECT content_hash FROM documents WHERE id = ?)", (memory_id, memory_id))[0][0]
    return waiting == 0 and stale == 0


@pytest.mark.slow
def test_a_late_fact_is_found_by_meaning_and_edits_and_deletes_replace_every_passage(tmp_path):
    fact, question, filler, joiner = DEEP["en"]
    config = write_config(tmp_path, **SETTINGS)
    worker = start_worker(config)
    try:
        with mcp_session(stdio_params(config)) as s:
            memory_id = s.ok("memorize", {"content": long_text(filler, joiner, 30, fact)})["id"]
            other = s.ok("memorize", {"content": long_text(filler, joiner, 15)})["id"]
            wait_for(lambda: settled(config, memory_id), 180, what="both long memories embedded")
            before = passage_owners(config, memory_id)
            best = s.ok("recall", {"query": question, "k": 2, "explain": True})["results"][0]
            assert best["id"] == memory_id and best["explain"]["channels"]["vector"]["passage"] > 0
            assert len(before) > 2 and passage_owners(config, other)

            s.ok("edit_memory", {"id": memory_id, "content": long_text(filler, joiner, 14)})
            wait_for(lambda: settled(config, memory_id), 180, what="the edited memory embedded again")
            after = passage_owners(config, memory_id)
            assert 0 < len(after) < len(before)
            assert all(fact not in hit["text"] for hit in s.ok("recall", {"query": question, "k": 2})["results"])

            others = passage_owners(config, other)
            s.ok("delete_memory", {"id": other})
            assert db_rows(config, "SELECT COUNT(*) FROM vectors WHERE memory_id = ?", (other,)) == [(0,)]
            tombstoned = {r[0] for r in db_rows(config, "SELECT owner_id FROM vector_tombstones"
                                                        " WHERE kind = 'passage'")}
            # Every passage vector removed left a tombstone (the edit's old ones too, since replaced).
            assert tombstoned >= set(before) | set(others)
    finally:
        assert stop(worker) == 0
