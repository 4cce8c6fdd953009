"""Long memories as passages: cut at turns and sentences within the embedder's reach, every
part findable by meaning (the vector channel alone, the real local embedder), explain naming
the passage that matched, and edits and deletes replacing every passage vector. Through the
official MCP client against the front built in this process; the worker's own stage runner
embeds (tests/process/test_passages_process.py: the same through real processes)."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest

from helpers import db_rows, front_in_process, run_every_stage, write_config
from long_memories import DEEP, FILLER_EN, long_text, passage_owners, stored_text
from shared.extract.atomize import MAX_FACTS, AtomRules, chosen
from shared.store.model.vectors import passage_owner
from shared.text.passages import OVERLAP_SHARE, PASSAGE_TOKENS, estimated_tokens, passage_holding, passages

TOOLS = {"server": {"exposed_tools": ["memorize", "recall", "edit_memory", "delete_memory"]}}


# -- cutting ---------------------------------------------------------------------------------


def test_a_text_within_a_passage_is_one_passage():
    text = "I adopted a small grey cat named Mochi last spring"
    assert [(p.start, p.end, p.text) for p in passages(text)] == [(0, len(text), text)]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_long_text_is_cut_into_passages_that_cover_it_within_the_budget(language):
    _, _, filler, joiner = DEEP[language]
    text = long_text(filler, joiner, 60)
    cut = passages(text)
    assert len(cut) > 3
    assert all(text[p.start:p.end] == p.text and estimated_tokens(p.text) <= PASSAGE_TOKENS for p in cut)
    covered = {i for p in cut for i in range(p.start, p.end)}
    assert all(i in covered for i, char in enumerate(text) if not char.isspace())
    # Cut between sentences, never inside one; neighbours share at most one short sentence.
    sentences = {s.strip() for s in filler}
    assert all(any(p.text.startswith(s) for s in sentences) and any(p.text.endswith(s) for s in sentences)
               for p in cut)
    for before, after in pairwise(cut):
        shared = text[after.start:before.end]
        assert after.start > before.start and estimated_tokens(shared) <= OVERLAP_SHARE * PASSAGE_TOKENS


def test_a_conversation_is_cut_between_turns_and_a_sentence_longer_than_a_passage_at_the_budget():
    turns = [f"{'Ann' if n % 2 else 'Ben'}: {FILLER_EN[n % 6]} {FILLER_EN[(n + 1) % 6]}" for n in range(30)]
    text = "\n".join(turns)
    assert all(text[p.start - 1] == "\n" or p.start == 0 for p in passages(text))
    assert all(re.match(r"(Ann|Ben): ", p.text) for p in passages(text))
    endless = "word " * 1000
    cut = passages(endless)
    assert len(cut) > 1 and all(estimated_tokens(p.text) <= PASSAGE_TOKENS for p in cut)
    assert "".join(p.text for p in cut).replace(" ", "") == endless.replace(" ", "")


# -- finding by meaning ------------------------------------------------------------------------


def test_the_passage_holding_a_part_is_the_first_that_holds_it_whole():
    text = " ".join(f"Sentence number {n} of a long and otherwise uneventful diary." for n in range(80))
    parts = passages(text)
    late = "Sentence number 77 of a long"
    assert passage_holding(parts, text, late) == len(parts) - 1
    assert passage_holding(parts, text, "Sentence number 3 of") == 0
    assert passage_holding(parts, text, "a sentence that is not there") == 0
    across = text[parts[0].end - 20:parts[0].end + 20]  # passage 0 holds its beginning only
    assert passage_holding(parts, text, across) == 1 and across in parts[1].text


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_fact_deep_in_a_long_memory_is_found_by_meaning_and_explain_names_its_passage(tmp_path, language):
    fact, question, filler, joiner = DEEP[language]
    config = write_config(tmp_path, retrieval={"channels": ["vector"]}, **TOOLS)
    text = long_text(filler, joiner, 30 if language == "en" else 24, fact)
    with front_in_process(config) as s:
        memory_id = s.ok("memorize", {"content": text})["id"]
        for n in range(3):  # the same kind of filler, without the fact
            s.ok("memorize", {"content": long_text(filler, joiner, 15 + n)})
        run_every_stage(config)
        assert text.index(fact) > len(text) * 3 // 4
        best = s.ok("recall", {"query": question, "k": 3, "explain": True})["results"][0]
    assert best["id"] == memory_id
    matched = best["explain"]["channels"]["vector"]
    stored = stored_text(config, memory_id)
    assert matched["passage"] > 0 and matched["passages"] == len(passages(stored))
    assert fact in stored[matched["start"]:matched["end"]] and fact[:20] in matched["passage_text"]


@pytest.mark.slow
def test_short_memories_stay_one_vector_and_long_ones_get_one_per_further_passage(tmp_path):
    config = write_config(tmp_path, **TOOLS)
    fact, _, filler, joiner = DEEP["en"]
    text = long_text(filler, joiner, 30, fact)
    with front_in_process(config) as s:
        short = s.ok("memorize", {"content": "I adopted a small grey cat named Mochi last spring"})["id"]
        long = s.ok("memorize", {"content": text})["id"]
    run_every_stage(config)
    assert passage_owners(config, short) == []
    assert len(passage_owners(config, long)) == len(passages(stored_text(config, long))) - 1 > 2
    assert db_rows(config, "SELECT memory_id, COUNT(*) FROM vectors WHERE kind = 'document' GROUP BY memory_id"
                   " ORDER BY memory_id") == [(short, 1), (long, 1)]


@pytest.mark.slow
def test_a_graph_entry_takes_the_vector_of_the_passage_holding_its_fact(tmp_path):
    config = write_config(tmp_path, **TOOLS)
    # Every sentence once: a fact repeated in a text is taken where it first appears.
    text = " ".join(f"{sentence[:-1]} on day {n}." for n, sentence in enumerate(FILLER_EN * 5))
    with front_in_process(config) as s:
        short = s.ok("memorize", {"content": "I adopted a small grey cat named Mochi last spring"})["id"]
        long = s.ok("memorize", {"content": text})["id"]
    run_every_stage(config)

    def vector(kind: str, owner: int) -> bytes:
        return db_rows(config, "SELECT vector FROM vectors WHERE kind = ? AND owner_id = ?", (kind, owner))[0][0]

    def entries(memory_id: int) -> list[tuple[int, str]]:
        return db_rows(config, "SELECT e.id, a.text FROM graph_entries e JOIN memory_atoms a ON a.id = e.atom_id"
                       " WHERE e.source_memory_id = ?", (memory_id,))

    assert entries(short) and all(vector("graph_entry", e) == vector("document", short) for e, _ in entries(short))
    text = stored_text(config, long)
    parts = passages(text)
    held = [(e, passage_holding(parts, text, t)) for e, t in entries(long)]
    assert any(number > 0 for _, number in held)  # facts are chosen over the whole text
    for entry, number in held:
        assert vector("graph_entry", entry) == (
            vector("passage", passage_owner(long, number)) if number else vector("document", long))


@pytest.mark.slow
def test_editing_or_deleting_a_long_memory_replaces_every_passage(tmp_path):
    config = write_config(tmp_path, retrieval={"channels": ["vector"]}, **TOOLS)
    fact, question, filler, joiner = DEEP["en"]
    with front_in_process(config) as s:
        memory_id = s.ok("memorize", {"content": long_text(filler, joiner, 30, fact)})["id"]
        other = s.ok("memorize", {"content": long_text(filler, joiner, 15)})["id"]
        run_every_stage(config)
        before = passage_owners(config, memory_id)
        assert s.ok("recall", {"query": question, "k": 1})["results"][0]["id"] == memory_id

        # Shorter, and the fact gone: fewer passages, none of the old vectors left.
        s.ok("edit_memory", {"id": memory_id, "content": long_text(filler, joiner, 14)})
        run_every_stage(config)
        after = passage_owners(config, memory_id)
        assert 0 < len(after) < len(before)
        stale = db_rows(config, "SELECT COUNT(*) FROM vectors WHERE memory_id = ? AND content_hash !="
                        " (SELECT content_hash FROM documents WHERE id = ?)", (memory_id, memory_id))
        assert stale == [(0,)]
        found = s.ok("recall", {"query": question, "k": 2, "explain": True})["results"]
        assert all(fact not in hit["text"] for hit in found)

        # Short now: one vector.
        s.ok("edit_memory", {"id": memory_id, "content": "We cleaned the garage on Saturday."})
        run_every_stage(config)
        assert passage_owners(config, memory_id) == []

        others = passage_owners(config, other)
        s.ok("delete_memory", {"id": other})
        assert others and db_rows(config, "SELECT COUNT(*) FROM vectors WHERE memory_id = ?", (other,)) == [(0,)]
        # Every passage vector removed left a tombstone: fronts drop them from their indexes.
        tombstoned = {r[0] for r in db_rows(config, "SELECT owner_id FROM vector_tombstones WHERE kind = 'passage'")}
        assert tombstoned >= set(before) | set(after) | set(others)


# -- facts of a long memory ----------------------------------------------------------------------


def test_a_long_memorys_facts_are_capped_and_chosen_over_the_whole_text():
    rules = AtomRules.load()
    plan = "Next Friday I have a dentist appointment at three in the afternoon."
    statements = [f"On day {i}: {FILLER_EN[i % len(FILLER_EN)]}" for i in range(30)]  # each its own
    statements.insert(26, plan)
    facts = chosen(statements, rules)
    assert len(facts) == MAX_FACTS and plan in facts  # the typed statement, deep in the text
    assert facts == sorted(facts, key=statements.index)  # in their order
    assert statements.index(facts[-2]) > len(statements) // 2  # not only the first lines
    assert chosen(statements[:MAX_FACTS], rules) == statements[:MAX_FACTS]
