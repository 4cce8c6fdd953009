"""Conversation context: a memory is indexed with the memories stored just before it in its
conversation, and a neighbour's edit or deletion re-indexes the memories that carried it."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from helpers import store_sql
from shared.assembly import open_services
from shared.config import AppConfig, MemoryConfig, StorageConfig
from shared.store.model.documents import DocumentFilter, MemoryFields

T0 = datetime(2023, 5, 8, 13, 56)


def services_with(tmp_path, memory: MemoryConfig):
    return open_services(AppConfig(storage=StorageConfig(data_dir=tmp_path / "data"), memory=memory),
                         queued=False)


@pytest.fixture
def service(tmp_path):
    services = services_with(tmp_path, MemoryConfig(context_turns=2, context_window_s=1800))
    yield services.memories
    services.close()


def turn(service, text, persona="p1", session=None, minutes=0):
    return service.memorize(text, MemoryFields(persona_id=persona, session_id=session,
                                               original_time=T0 + timedelta(minutes=minutes))).id


def context_of(service, memory_id) -> str:
    return store_sql(service.store, "SELECT context FROM documents_fts WHERE rowid = ?", (memory_id,))[0][0]


def bm25_ids(service, word, persona="p1", context_weight=1.0):
    return [i for i, _ in service.store.documents.bm25([word], DocumentFilter(persona_id=persona), 10, context_weight)]


def test_a_reply_is_found_by_the_words_of_the_question_it_answers(service):
    question = turn(service, "Melanie: What did you do with the kids on the weekend?")
    answer = turn(service, "Caroline: We went camping by the lake!", minutes=1)
    later = turn(service, "Melanie: Sounds lovely.", minutes=2)
    fourth = turn(service, "Caroline: It was.", minutes=3)
    assert context_of(service, question) == ""
    assert "weekend" in context_of(service, answer).split()
    assert service.store.neighbours.of(later)[0][0] == answer  # nearest first
    assert "weekend" not in context_of(service, fourth).split()  # two turns back at most
    assert set(bm25_ids(service, "weekend")) == {question, answer, later}
    # a word in the text itself counts more than one in the context at weight 1 and below
    assert bm25_ids(service, "camping", context_weight=0.5)[0] == answer


def test_context_stays_within_persona_session_and_time_window(service):
    turn(service, "Alice: my cactus bloomed", persona="p1")
    other_persona = turn(service, "Bob: nice", persona="p2", minutes=1)
    turn(service, "Alice: the orchid too", persona="p1", session="s1", minutes=2)
    other_session = turn(service, "Alice: hello", persona="p1", session="s2", minutes=3)
    first = turn(service, "Alice: a walk in the park", persona="p3")
    too_late = turn(service, "Alice: back home", persona="p3", minutes=31)
    chained = turn(service, "Alice: dinner now", persona="p3", minutes=40)
    assert context_of(service, other_persona) == ""
    assert context_of(service, other_session) == ""
    assert context_of(service, too_late) == ""
    assert service.store.neighbours.of(chained) == [(too_late, service.store.documents.get(too_late).text)]
    assert first not in [i for i, _ in service.store.neighbours.of(chained)]


def test_deleting_a_neighbour_takes_its_words_out_of_every_context(service):
    first = turn(service, "Caroline: I adopted a greyhound called Zephyrine")
    second = turn(service, "Melanie: How lovely!", minutes=1)
    third = turn(service, "Caroline: She loves the beach", minutes=2)
    assert bm25_ids(service, "zephyrine") == [first, second, third]
    service.delete(first)
    assert bm25_ids(service, "zephyrine") == []
    assert "zephyrin" not in context_of(service, second) + context_of(service, third)
    assert service.store.neighbours.dependents(first) == []
    # what is left of the conversation still counts
    assert "love" in context_of(service, third) or "lovely" in context_of(service, third)


def test_editing_a_neighbour_re_indexes_the_memories_that_carry_it(service):
    first = turn(service, "Caroline: I play the violin")
    second = turn(service, "Melanie: Since when?", minutes=1)
    service.edit(first, "Caroline: I play the cello", {})
    assert bm25_ids(service, "violin") == []
    assert bm25_ids(service, "cello") == [first, second]


def test_backfill_rebuilds_rows_with_their_context(service):
    first = turn(service, "Caroline: my sister lives in Lisbon")
    second = turn(service, "Melanie: have you visited?", minutes=1)
    store_sql(service.store, "DELETE FROM documents_fts")  # what migration 7 leaves: no BM25 rows,
    store_sql(service.store, "DELETE FROM memory_context")  # no links
    assert service.backfill_fts() == 2
    assert service.backfill_fts() == 0
    assert bm25_ids(service, "lisbon") == [first, second]


def test_context_turns_zero_indexes_memories_alone(tmp_path):
    services = services_with(tmp_path, MemoryConfig(context_turns=0))
    alone = services.memories
    turn(alone, "Caroline: I adopted a greyhound")
    second = turn(alone, "Melanie: lovely", minutes=1)
    assert context_of(alone, second) == ""
    services.close()


def test_a_memory_is_embedded_with_its_context_and_again_when_a_neighbour_goes(service):
    import numpy as np

    from aokun_worker.handlers import EmbedHandler
    from shared.embedders.local import E5Embedder

    zeroth = turn(service, "Melanie: Any news?", minutes=-1)
    first = turn(service, "Caroline: I adopted a greyhound called Zephyrine")
    second = turn(service, "Melanie: How lovely!", minutes=1)
    embedder = E5Embedder(threads=1)
    handler = EmbedHandler(embedder, 8, service.store)
    docs = service.store.documents.get_many([zeroth, first, second])
    got = handler.compute([docs[second]])[0]
    # the nearest neighbour only (EMBED_CONTEXT_TURNS), though BM25 carries both
    together = embedder.embed_passages([docs[first].text + "\n" + docs[second].text])[0]
    alone = embedder.embed_passages([docs[second].text])[0]
    assert float(np.dot(got.document, together)) > 0.999 > float(np.dot(got.document, alone))
    assert len(service.store.neighbours.of(second)) == 2
    with service.store.write() as tx:
        handler.store(tx, docs[second], got, 0.0)
    store_sql(service.store, "UPDATE memory_stages SET status = 'done' WHERE memory_id = ? AND stage = 'embed'",
              (second,))
    service.delete(first)
    assert store_sql(service.store, "SELECT COUNT(*) FROM vectors WHERE memory_id = ?", (second,))[0][0] == 0
    assert [r["status"] for r in service.store.stages.of_memory(second) if r["stage"] == "embed"] == ["pending"]
    # what is left of its context: the turn before the deleted one
    after = embedder.embed_passages([docs[zeroth].text + "\n" + docs[second].text])[0]
    assert handler.compute([service.store.documents.get(second)])[0].document @ after > 0.999


def test_a_long_neighbour_lends_the_embedding_only_its_last_sentences(service):
    from aokun_worker.handlers import EMBED_CONTEXT_TOKENS, embedding_texts
    from shared.text.passages import estimated_tokens

    said = ["We drove up to the lake house on Friday evening after work.",
            "The road was closed near the bridge so we took the long way round.",
            "By the time we arrived the kids were asleep in the back seat.",
            "Anyway, did you ever get the tickets for the concert in June?"]
    first = turn(service, "Melanie: " + " ".join(said))
    second = turn(service, "Caroline: Yes, two seats near the stage!", minutes=1)
    docs = service.store.documents.get_many([first, second])
    [text] = embedding_texts(docs[second], [docs[first].text])
    context, own = text.rsplit("\n", 1)
    assert own == docs[second].text and context.endswith(said[-1])
    assert said[0] not in context and estimated_tokens(context) <= EMBED_CONTEXT_TOKENS


def test_bm25_ranks_only_the_recalls_persona_and_session(service):
    from shared.store.sqlite.match import scoped

    mine = turn(service, "Alice: the quokka photo", persona="alice", session="s1")
    turn(service, "Bob: a quokka too", persona="bob", session="s1", minutes=40)
    other_session = turn(service, "Alice: quokka again", persona="alice", session="s2", minutes=80)
    assert set(bm25_ids(service, "quokka", persona="alice")) == {mine, other_session}
    both = service.store.documents.bm25(["quokka"], DocumentFilter(persona_id="alice", session_id="s1"), 10)
    assert [i for i, _ in both] == [mine]
    # the scope column holds no words of the text, and a term is never read as a scope
    assert scoped('"quokka"', "scope", None, None) == '"quokka"'
    assert scoped('"a" OR "b"', "scope", "alice", None).endswith('AND ("a" OR "b")')
    assert scoped(None, "scope", "alice", "s1") is None


def test_facts_stored_close_in_time_are_not_each_others_context(service):
    quokka = turn(service, "Quokkas live on Rottnest Island and smile for photos.")
    dentist = turn(service, "I have a dentist appointment on Friday.", minutes=1)
    assert context_of(service, dentist) == ""
    assert bm25_ids(service, "dentist") == [dentist]
    assert quokka not in bm25_ids(service, "dentist")


def test_turns_of_one_dialogue_are_context_without_a_session(service):
    named = [service.memorize(text, MemoryFields(persona_id="p1", participants=("Ana", "Ben"),
                                                 original_time=T0 + timedelta(minutes=i))).id
             for i, text in enumerate(["Where did you go for the holidays?", "To the coast, surfing."])]
    assert "holidays" in context_of(service, named[1]).split()
    other = service.memorize("A different chat about surfing.", MemoryFields(
        persona_id="p1", participants=("Cleo",), original_time=T0 + timedelta(minutes=2))).id
    assert context_of(service, other) == ""
