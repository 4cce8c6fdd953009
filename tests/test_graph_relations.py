"""Typed entities, typed relations and the self node, and recall that follows relations: by
the rules alone, then through the worker's stages, the local embedder and the official MCP client."""

from __future__ import annotations

import pytest

from helpers import all_processed, db_rows, front_in_process, run_every_stage, write_config
from shared.config import GraphConfig, TextConfig
from shared.extract.atomize import speaker_of
from shared.extract.entities import EntityFinder
from shared.extract.graph_rules import GraphBuilder, StoredFact
from shared.extract.relation_words import vocabulary
from shared.extract.relations import find_relations
from shared.search.relation_route import Chain, chains
from shared.store.model.documents import Document, MemoryFields
from shared.store.model.graph import SELF_CANONICAL


@pytest.fixture(scope="module")
def finder():
    return EntityFinder(_segmenter())


def _segmenter():
    from shared.text.segment import Segmenter

    return Segmenter(TextConfig())


@pytest.mark.parametrize("sentence, expected", [
    ("We flew to Tokyo and then took the train to Lisbon.", {"Tokyo": "place", "Lisbon": "place"}),
    ("Mei works as a nurse at St Mary's Hospital.", {"Mei": "person", "St Mary's Hospital": "organisation"}),
    ("Sam just joined Acme Corp as an engineer.", {"Sam": "person", "Acme Corp": "organisation"}),
    ("I moved to Springfield in May.", {"Springfield": "place"}),            # a small town, said as a place
    ("Florence called me yesterday.", {"Florence": "person"}),               # a city's name, used as a name
    ("She studied at the University of Tokyo.", {"University of Tokyo": "organisation"}),
    ("The LGBTQ support group meets on Friday.", {"LGBTQ": "other"}),
    ("我姐姐王丽住在成都", {"王丽": "person", "成都": "place"}),
    ("她在中国银行上班", {"中国银行": "organisation"}),
    ("明天下午去见客户王总", {"王总": "person"}),
    ("阿里巴巴集团的总部在杭州", {"阿里巴巴集团": "organisation", "杭州": "place"}),
])
def test_entities_have_types(finder, sentence, expected):
    found = {m.name: m.type for m in finder.mentions(sentence)}
    assert found == expected


@pytest.mark.parametrize("sentence", ["熊猫很可爱", "My dog loves the park.", "Painting is fun."])
def test_animals_and_common_words_are_not_people(finder, sentence):
    assert [m for m in finder.mentions(sentence) if m.type == "person"] == []


def relations(finder, sentence, self_name=None):
    found = find_relations(sentence, finder.mentions(sentence), self_name)
    return {(r.subject.name if r.subject else "SELF", r.relation, r.object.name if r.object else "SELF")
            for r in found}


@pytest.mark.parametrize("sentence, expected", [
    ("Mei is engaged to Tomas.", ("Mei", "fiance", "Tomas")),
    ("Tomas's fiancée Mei is a nurse.", ("Tomas", "fiance", "Mei")),
    ("My sister Emma is visiting next weekend.", ("SELF", "sister", "Emma")),
    ("Emma is my sister.", ("SELF", "sister", "Emma")),
    ("Ana is Mei's brother-in-law.", ("Mei", "brother_in_law", "Ana")),
    ("My boss Karen approved the budget.", ("SELF", "manager", "Karen")),
    ("Jackson and I are best friends.", ("Jackson", "friend", "SELF")),
    ("Priya works at Google.", ("Priya", "works_at", "Google")),
    ("Liam lives in Dublin.", ("Liam", "lives_in", "Dublin")),
    ("I'm originally from Lisbon.", ("SELF", "comes_from", "Lisbon")),
    ("I have a cat named Luna.", ("SELF", "pet", "Luna")),
    ("王芳的丈夫李强在医院工作", ("王芳", "husband", "李强")),
    ("张伟是王磊的表哥", ("王磊", "cousin", "张伟")),
    ("李强和王芳是夫妻", ("李强", "spouse", "王芳")),
    ("我弟弟王明在北京大学读书", ("SELF", "younger_brother", "王明")),
    ("王明在北京大学读书", ("王明", "studies_at", "北京大学")),
    ("我的同学陈静来自杭州", ("陈静", "comes_from", "杭州")),
    ("我在腾讯工作", ("SELF", "works_at", "腾讯")),
    ("领导老刘让我加班", ("SELF", "manager", "老刘")),
    ("我家的猫叫团子，今年三岁", ("SELF", "pet", "团子")),
])
def test_relations_by_rules(finder, sentence, expected):
    assert expected in relations(finder, sentence)


def test_a_person_described_but_not_named_is_a_node_a_chain_can_pass():
    # 王磊的姐姐 is married to 张伟: 王磊 -older_sister-> 王磊的姐姐 -husband-> 张伟.
    found = relations(EntityFinder(_segmenter()), "王磊的姐姐嫁给了张伟")
    assert found == {("王磊", "older_sister", "王磊的姐姐"), ("王磊的姐姐", "husband", "张伟")}
    # A speaker's "my sister" is the speaker's.
    assert relations(EntityFinder(_segmenter()), "My sister is visiting.", "Caroline") == {
        ("SELF", "sister", "Caroline's sister")}


def test_every_relation_has_its_inverse():
    v = vocabulary()
    assert v.inverse("husband") == "wife" and v.inverse("wife") == "husband"
    assert v.inverse("older_sister") == "younger_sibling" and v.inverse("younger_brother") == "older_sibling"
    assert v.kinds["friend"].symmetric and v.kinds["colleague"].symmetric and v.kinds["classmate"].symmetric
    assert {"husband", "wife", "fiance", "girlfriend", "boyfriend"} <= v.asked_for("partner")
    assert v.asked_for("sister") == {"sister", "older_sister", "younger_sister"}


def build(text: str, **fields):
    document = Document(1, text, "h", MemoryFields(**fields), False, 0, None, 0.0, 0.0)
    return GraphBuilder(_segmenter(), GraphConfig()).build(document, speaker_of(document),
                                                           [StoredFact(1, text, 0.8)])


def test_the_self_is_one_node_in_both_languages_and_the_speaker_in_a_turn():
    english = build("I moved to Lisbon and my sister Emma lives in Tokyo.", persona_id="p")
    chinese = build("我在腾讯工作", persona_id="p")
    for g in (english, chinese):
        selves = {n.key for n in g.nodes if n.canonical == SELF_CANONICAL}
        assert selves == {f"person:{SELF_CANONICAL}"}
    # The persona's own name is the user too.
    named = build("Alice adopted a cat named Mochi.", persona_id="alice", participants=("Alice",))
    assert {n.canonical for n in named.nodes if n.type == "person"} == {SELF_CANONICAL}
    # In a speaker's turn, "I" and "my" are the speaker.
    turn = build("Caroline: my sister Emma is a teacher.", persona_id="p")
    assert [(e.src.canonical, e.relation, e.dst.canonical) for e in turn.edges if e.type == "relation"] == [
        ("caroline", "sister", "emma")]
    assert not any(n.canonical == SELF_CANONICAL for n in turn.nodes)


@pytest.mark.parametrize("question, expected", [
    ("What does Tomas's partner do?", [Chain(("tomas",), ("partner",))]),
    ("Where does my sister live?", [Chain((SELF_CANONICAL,), ("sister",))]),
    ("Who is the manager of Ana?", [Chain(("ana",), ("manager",))]),
    ("What does Mei's brother's wife do?", [Chain(("mei",), ("brother", "wife"))]),
    ("李强的妻子做什么工作？", [Chain(("李强",), ("wife",))]),
    ("我姐姐住在哪里", [Chain((SELF_CANONICAL,), ("older_sister",))]),
])
def test_questions_become_relation_chains(question, expected):
    assert chains(question, {}) == expected
    assert chains("王磊的姐姐的丈夫是做什么的", {})[0].relations == ("older_sister", "husband")


PEOPLE = [
    "Mei is engaged to Tomas.",
    "Mei works as a nurse at the children's hospital.",
    "Tomas plays bass in a jazz band on weekends.",
    "Ana is Mei's brother.",
    "Ana teaches chemistry at a high school.",
    "Priya and Tomas went hiking last month.",
    "Priya works as a software engineer.",
    "Tomas's sister Lena is a pilot.",
    "王芳的丈夫是李强。",
    "李强在一家银行做会计。",
    "王芳是一名小学老师。",
    "李强的妻子喜欢画画。",
    "王磊的姐姐嫁给了张伟。",
    "张伟是一名厨师，在一家川菜馆工作。",
    "王磊在读大学，学的是物理。",
    "张伟的同事小赵喜欢打篮球。",
    "I moved to Lisbon last spring.",
    "Lisbon has steep hills and yellow trams.",
    "Acme Corp hired me as a designer.",
    "The weather was cold and rainy all week.",
]


@pytest.fixture(scope="module")
def people_graph(tmp_path_factory):
    """The memories above in one persona, processed by the worker's stages with the local
    embedder, and an MCP session on the real front."""
    config = write_config(tmp_path_factory.mktemp("relations"),
                          server={"exposed_tools": ["memorize", "recall"]})
    with front_in_process(config) as session:
        ids = {text: session.ok("memorize", {"content": text, "metadata": {"persona_id": "friends"}})["id"]
               for text in PEOPLE}
        run_every_stage(config)
        assert all_processed(config, len(PEOPLE))
        yield session, config, ids


@pytest.mark.slow
def test_the_stored_graph_has_typed_entities_and_relations(people_graph):
    _, config, _ = people_graph
    nodes = set(db_rows(config, "SELECT type, canonical FROM graph_nodes WHERE persona_id = 'friends'"))
    assert {("place", "lisbon"), ("organisation", "acme corp"), ("person", "mei"), ("person", "tomas"),
            ("person", "王芳"), ("person", "李强"), ("person", SELF_CANONICAL)} <= nodes
    assert not {("person", "lisbon"), ("person", "acme corp")} & nodes
    relations = set(db_rows(config, "SELECT s.canonical, e.relation, d.canonical FROM graph_edges e"
                                    " JOIN graph_nodes s ON s.id = e.src_node_id"
                                    " JOIN graph_nodes d ON d.id = e.dst_node_id WHERE e.type = 'relation'"))
    assert {("mei", "fiance", "tomas"), ("mei", "brother", "ana"), ("王芳", "husband", "李强"),
            ("王磊", "older_sister", "王磊的姐姐"), ("王磊的姐姐", "husband", "张伟"),
            (SELF_CANONICAL, "lives_in", "lisbon")} <= relations


@pytest.mark.slow
@pytest.mark.parametrize("question, answer", [
    ("What does Tomas's partner do?", "Mei works as a nurse at the children's hospital."),  # inverse of fiance
    ("What does Mei's brother do for a living?", "Ana teaches chemistry at a high school."),
    ("王芳的丈夫做什么工作？", "李强在一家银行做会计。"),
    ("李强的妻子是做什么的？", "王芳是一名小学老师。"),                                   # inverse of husband
    ("王磊的姐姐的丈夫做什么工作？", "张伟是一名厨师，在一家川菜馆工作。"),              # a chain of two
])
def test_recall_follows_relations(people_graph, question, answer):
    session, _, ids = people_graph
    hits = session.ok("recall", {"query": question, "persona_id": "friends", "k": 3, "explain": True})["results"]
    assert ids[answer] in [h["id"] for h in hits], [h["text"] for h in hits]


@pytest.mark.slow
def test_a_question_naming_a_place_reaches_memories_about_it(people_graph):
    session, _, ids = people_graph
    hits = session.ok("recall", {"query": "What is it like in Lisbon?", "persona_id": "friends", "k": 3})["results"]
    assert {ids["Lisbon has steep hills and yellow trams."], ids["I moved to Lisbon last spring."]} <= {
        h["id"] for h in hits}
