"""Atom types and plan deadlines on everyday sentences, Chinese and English, worked by hand.

Anchor: Tuesday 9 December 2025, 10:00 (1 December 2025 is a Monday, so the 13th is a Saturday,
the 14th a Sunday, next week's Friday the 19th; 5 January 2026 is a Monday).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from fake_openai import FakeEmbeddingsServer
from helpers import db_rows, front_in_process, run_every_stage, write_config
from shared.config import AtomsConfig
from shared.extract.atomize import AtomRules, draft_atoms
from shared.store.model.documents import Document, MemoryFields

TUESDAY = datetime(2025, 12, 9, 10, 0)


@pytest.fixture(scope="module")
def rules():
    return AtomRules.load()


def atoms_of(rules, text: str, anchor: datetime = TUESDAY):
    doc = Document(1, text, "h", MemoryFields(original_time=anchor), False, 0, None, 0.0, 0.0)
    return draft_atoms(doc, rules, AtomsConfig())


def due_date(draft) -> datetime | None:
    return datetime.fromtimestamp(draft.deadline, timezone.utc).replace(tzinfo=None) if draft.deadline else None


def end_of(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, 23, 59, 59)


@pytest.mark.parametrize("text, due", [
    # Whoever the subject, a time ahead with a verb that puts the action there is a plan,
    # over relational or factual words in the same sentence.
    ("Sam starts on January 5", end_of(2026, 1, 5)),  # said in December: next January
    ("Caroline is taking Luna to the vet on Saturday", end_of(2025, 12, 13)),
    ("My sister Emma is visiting this weekend", end_of(2025, 12, 14)),
    ("I have a dentist appointment on the 14th at 3pm", datetime(2025, 12, 14, 15, 0)),
    ("The report is due by Friday", end_of(2025, 12, 12)),
    ("The school play is on March 3rd", end_of(2026, 3, 3)),
    ("I need to renew my passport by the end of the month", end_of(2025, 12, 31)),
    ("我姐姐下个月结婚", end_of(2026, 1, 31)),
    ("明年三月我们要去日本旅游", end_of(2026, 3, 31)),  # March of next year, not its end
    ("下周五下午两点开家长会", datetime(2025, 12, 19, 14, 0)),
    ("这个周末带孩子去动物园", end_of(2025, 12, 14)),
    ("后天下午三点去医院复查", datetime(2025, 12, 11, 15, 0)),
    ("小王14号出差去深圳", end_of(2025, 12, 14)),
    ("妈妈周六过来看我们", end_of(2025, 12, 13)),
])
def test_plans_and_their_deadlines(rules, text, due):
    [atom] = atoms_of(rules, text)
    assert (atom.type, due_date(atom)) == ("planned", due)


@pytest.mark.parametrize("text, atom_type", [
    # General and descriptive facts are factual; unknown only when nothing fits.
    ("Water boils at 100 °C", "factual"),
    ("Oslo is the capital of Norway", "factual"),
    ("北京的冬天很干燥", "factual"),
    ("我家的猫叫团子，今年三岁", "factual"),
    ("长江是中国最长的河", "factual"),
    ("My birthday is on July 14", "factual"),  # comes every year: not a plan
    # Told, not planned: a past cue cancels a weekday.
    ("We went to the farmers market on Saturday", "episodic"),
    ("上周六我们去爬了香山", "episodic"),
    ("Emma is my younger sister", "relational"),
    ("阿杰是我高中同学", "relational"),
    ("Jess prefers tea over coffee", "preference"),
    ("比起猫我更喜欢狗", "preference"),
    ("Sure, sounds good", "unknown"),
    ("Wow, that's amazing", "unknown"),
    ("哈哈哈笑死我了", "unknown"),
    ("好的，没问题", "unknown"),
])
def test_everyday_types(rules, text, atom_type):
    assert [a.type for a in atoms_of(rules, text)] == [atom_type]


def test_classify_still_says_unknown_for_a_plain_statement(rules):
    """classify reports the rules' evidence; the descriptive fallback is the atom's."""
    assert rules.classify("北京的冬天很干燥")[0] == "unknown"
    assert rules.atom_type("北京的冬天很干燥")[0] == "factual"


@pytest.mark.parametrize("text, facts", [
    # A title or an initial does not end a sentence, nor a.m. / p.m. before a small letter.
    ("I have a dentist appointment on the 14th at 3 p.m. with Dr. Lee. Mrs. Brown will drive me.",
     ["I have a dentist appointment on the 14th at 3 p.m. with Dr. Lee.", "Mrs. Brown will drive me."]),
    # A sentence too short to be a statement is kept when the rules give it a type.
    ("今天加班到很晚，好累。周五看牙医。", ["今天加班到很晚，好累。", "周五看牙医。"]),
])
def test_no_fact_is_lost_to_sentence_splitting(rules, text, facts):
    assert [a.text for a in atoms_of(rules, text)] == facts


def test_a_clock_time_already_past_is_tomorrows(rules):
    [atom] = atoms_of(rules, "Remind me to call mom at 9am", datetime(2025, 12, 9, 16, 0))
    assert due_date(atom) == datetime(2025, 12, 10, 9, 0)


@pytest.mark.slow
def test_memorized_plans_get_their_type_and_deadline(tmp_path):
    """Through the MCP client and the real front, the stages run by the worker's own runner; said on
    Tuesday 8 January 2030."""
    said = "2030-01-08T10:00:00"
    expected = {
        "Caroline is taking Luna to the vet on Saturday": ("planned", end_of(2030, 1, 12)),
        "我姐姐下周五要来北京": ("planned", end_of(2030, 1, 18)),
        "I have a dentist appointment on the 14th at 3pm": ("planned", datetime(2030, 1, 14, 15, 0)),
        "北京的冬天很干燥": ("factual", None),
    }
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(tmp_path, embedding={"provider": "openai", "base_url": api.base_url,
                                                   "model": "fake", "dimensions": 32})
        with front_in_process(config) as session:
            ids = {session.ok("memorize", {"content": text, "metadata": {"original_time": said}})["id"]: text
                   for text in expected}
        run_every_stage(config)
        assert db_rows(config, "SELECT COUNT(*) FROM memory_stages WHERE stage = 'atoms'"
                               " AND status = 'done'") == [(len(ids),)]
    for memory_id, text in ids.items():
        rows = db_rows(config, "SELECT type, deadline FROM memory_atoms WHERE memory_id = ?", (memory_id,))
        due = expected[text][1]
        assert rows == [(expected[text][0], due.replace(tzinfo=timezone.utc).timestamp() if due else None)], text
