"""aokun export / import through the real command against real temporary stores: the JSONL
round trip, the Markdown export, Markdown notes and MCP memory files imported, idempotence and
bad rows reported by line."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from helpers import aokun_in_process, db_rows, last_line, memory_service, write_config
from shared.config import StorageConfig
from shared.store import open_store
from shared.store.model.documents import MemoryFields
from shared.transfer import render

DATA = Path(__file__).parent / "data" / "transfer"
# Every column a memory keeps but its id and source_hash (an import gives a row without one
# the hash of what it is, so that importing it again adds nothing).
COLUMNS = ("text, content_hash, topics, participants, key_facts, sentiment, importance, pinned,"
           " archived, session_id, persona_id, original_time, original_ts, persona_summary,"
           " access_count, last_access_time, create_time, update_time")


def store(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return write_config(folder)


def memories(config: Path) -> list[tuple]:
    return db_rows(config, f"SELECT {COLUMNS} FROM documents ORDER BY create_time")


class Clock:
    def __init__(self, start: float):
        self.now = start

    def __call__(self) -> float:
        self.now += 1234.567891
        return self.now


def seed(config: Path) -> dict[str, int]:
    """A store with every kind of memory: times, personas, pinned, archived, edited, recalled,
    decayed, one made from a transcript (its own source_hash), text JSON finds awkward."""
    store = open_store(StorageConfig(data_dir=config.parent / "data"))
    clock = Clock(1_700_000_000.123456)
    service = memory_service(store, clock=clock)
    ids = {}
    ids["plain"] = service.memorize("Caroline adopted a cat named Luna last week.", MemoryFields(
        topics=("pets", "cats"), participants=("Caroline",), key_facts=("Caroline adopted a cat",),
        sentiment="positive", importance=0.8, session_id="s1", persona_id="alice")).id
    # Said in the same session 20 minutes after the first: indexed with it as its context.
    ids["context"] = service.memorize("She is called Luna because of her white fur.", MemoryFields(
        session_id="s1", persona_id="alice")).id
    ids["chinese"] = service.memorize("我明天下午三点去北京开会", MemoryFields(
        persona_id="alice", pinned=True, original_time=datetime(2024, 5, 8, 13, 56))).id
    ids["no_persona"] = service.memorize("The deploy key rotates every ninety days.", MemoryFields(
        persona_summary="Ops notes", original_time=datetime(2023, 1, 2))).id
    ids["archived"] = service.memorize("An old note nobody needs any more.", MemoryFields(
        persona_id="bob/会议", importance=0.1)).id
    ids["transcript"], _ = service.memorize_once("Melanie paints landscapes.", MemoryFields(
        persona_id="alice", source_hash="f" * 64))
    ids["transcript"] = ids["transcript"].id
    ids["edited"] = service.memorize("Meeting moved to Friday.", MemoryFields(persona_id="alice")).id
    service.edit(ids["edited"], "Meeting moved to Friday at 10.", {"topics": ("work",)})
    ids["awkward"] = service.memorize('Line one\u2028still one "quoted" \\ emoji 🐈 tab\there',
                                      MemoryFields(persona_id="alice")).id
    service.touch([ids["plain"]], clock())
    service.touch([ids["plain"]], clock())
    with store.write() as tx:
        tx.documents.archive_stale(clock() + 10, importance_below=0.2)
        tx.documents.set_decayed([(0.45, 1.5, ids["no_persona"])])
    store.close()
    return ids


@pytest.mark.slow
def test_jsonl_round_trip_gives_the_same_memories_metadata_and_times(tmp_path):
    source, target = store(tmp_path, "source"), store(tmp_path, "target")
    seed(source)
    before = memories(source)
    assert len(before) == 8 and {r[8] for r in before} == {0, 1}  # one archived
    exported = tmp_path / "memories.jsonl"
    assert last_line(aokun_in_process("export", exported, "--config", source)) == f"exported 8 memories to {exported}"
    # One memory a line for any line reader: U+2028 in a text is written escaped.
    lines = exported.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "aokun-export" and header["version"] == 1 and header["memories"] == 8
    assert len(lines) == 9 and "\u2028" not in exported.read_text(encoding="utf-8")

    result = aokun_in_process("import", exported, "--config", target)
    assert last_line(result).startswith("imported 8, already present 0, skipped 0 (8 rows, jsonl")
    assert memories(target) == before
    # The BM25 rows are the same too (conversation context included), and so is the
    # transcript's own source hash.
    bm25 = "SELECT tokens, context FROM documents_fts ORDER BY rowid"
    assert db_rows(target, bm25) == db_rows(source, bm25)
    assert any("luna" in context for _, context in db_rows(source, bm25))
    assert db_rows(target, "SELECT COUNT(*) FROM documents WHERE source_hash = ?", ("f" * 64,)) == [(1,)]
    assert db_rows(target, "SELECT COUNT(*) FROM memory_stages WHERE status = 'pending'") == [(24,)]

    # Again, into either store: nothing is added.
    assert last_line(aokun_in_process("import", exported, "--config", target)).startswith(
        "imported 0, already present 8, skipped 0")
    assert last_line(aokun_in_process("import", exported, "--config", source)).startswith(
        "imported 0, already present 8, skipped 0")
    assert len(memories(target)) == 8 and len(memories(source)) == 8

    # And the imported store exports the same records (but for the hashes imports gave).
    again = tmp_path / "again.jsonl"
    last_line(aokun_in_process("export", again, "--config", target))

    def strip(path):
        return [{k: v for k, v in json.loads(line).items() if k not in ("id", "source_hash")}
                for line in path.read_text(encoding="utf-8").split("\n")[1:] if line]

    assert strip(again) == strip(exported)


@pytest.mark.slow
def test_export_of_one_persona_with_its_atoms_and_import_into_another(tmp_path):
    source, target = store(tmp_path, "source"), store(tmp_path, "target")
    seed(source)
    exported = tmp_path / "alice.jsonl"
    done = aokun_in_process("export", "--persona", "alice", "--atoms", exported, "--config", source)
    assert last_line(done).startswith("exported 6 memories")
    records = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()[1:]]
    assert {r["persona_id"] for r in records} == {"alice"} and all(r["atoms"] == [] for r in records)
    assert last_line(aokun_in_process("import", exported, "--persona", "carol", "--config", target)).startswith(
        "imported 6,")
    assert db_rows(target, "SELECT DISTINCT persona_id FROM documents") == [("carol",)]
    # The transcript's memory moved to another persona: another memory, another source hash.
    assert db_rows(target, "SELECT COUNT(*) FROM documents WHERE source_hash = ?", ("f" * 64,)) == [(0,)]
    assert last_line(aokun_in_process("import", exported, "--persona", "dave", "--config", target)).startswith(
        "imported 6,")
    assert last_line(aokun_in_process("import", exported, "--persona", "carol", "--config", target)).startswith(
        "imported 0, already present 6")


def test_markdown_export_is_one_readable_file_per_persona(tmp_path):
    source = store(tmp_path, "source")
    ids = seed(source)
    folder = tmp_path / "md"
    assert last_line(aokun_in_process("export", "--format", "markdown", folder, "--config", source)) == \
        f"exported 8 memories of 3 persona(s) to {folder}"
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(["alice.md", "no-persona.md", render.file_name("bob/会议")])
    assert render.file_name("bob/会议").startswith("bob_会议-")
    alice = (folder / "alice.md").read_text(encoding="utf-8")
    assert alice.startswith("---\npersona: alice\nmemories: 6\n")
    assert f"## 2024-05-08 13:56 · memory {ids['chinese']} · pinned\n\n我明天下午三点去北京开会\n" in alice
    assert "- topics: pets, cats" in alice and "recalled 2 times, last" in alice
    assert "  - Caroline adopted a cat" in alice
    archived = (folder / render.file_name("bob/会议")).read_text(encoding="utf-8")
    assert f"memory {ids['archived']} · archived" in archived
    assert "recalled 1.5 times" in (folder / "no-persona.md").read_text(encoding="utf-8")
    # A file where the folder should be is refused in one line.
    clash = tmp_path / "file"
    clash.write_text("x")
    result = aokun_in_process("export", "--format", "markdown", clash, "--config", source)
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert "is a file: the Markdown export writes a folder" in result.stderr


@pytest.mark.slow
def test_markdown_notes_become_memories_by_note_or_heading_section(tmp_path):
    config = store(tmp_path, "notes")
    result = aokun_in_process("import", DATA / "notes", "--config", config)
    assert result.returncode == 1, result.stderr  # broken.md was skipped
    assert result.stdout.strip().endswith(
        f"imported 8, already present 0, skipped 1 (9 rows, markdown, from {DATA / 'notes'})")
    assert result.stderr.strip().splitlines() == [
        "aokun import: broken.md:1: front matter is not valid YAML (expected ',' or ']', but got ':'): "
        "fix it or remove it; skipped"]
    rows = db_rows(config, "SELECT text, topics, participants, original_time FROM documents ORDER BY id")
    texts = [r[0] for r in rows]
    # A short note is one memory, with its title; the daily note takes its file name's date.
    assert texts[0] == "[2024-03-05] 2024-03-05\n\nDentist appointment moved to next Thursday. " \
                       "Remember to bring the insurance card this time."
    assert rows[0][3].startswith("2024-03-05T00:00:00")  # on the user's clock (memory.time_zone)
    # The long note is one memory per heading section, each led by its heading path.
    kyoto = [r for r in rows if "Kyoto trip" in r[0].split("\n")[0]]
    assert [t[0].split("\n")[0] for t in kyoto] == [
        "[2023-04-02] Kyoto trip", "[2023-04-02] Kyoto trip › Day 1", "[2023-04-02] Kyoto trip › Day 2",
        "[2023-04-02] Kyoto trip › Day 2 › Food", "[2023-04-02] Kyoto trip › Day 3",
        "[2023-04-02] Kyoto trip › Packing list"]
    assert all(json.loads(r[1]) == ["travel", "japan"] and json.loads(r[2]) == ["Alice"] for r in kyoto)
    day1 = next(r[0] for r in kyoto if "Day 1" in r[0].split("\n")[0])
    assert 'print("# not a heading")' in day1  # a "#" line in a code fence is no heading
    alice = next(r for r in rows if "bouldering" in r[0])
    assert alice[0].startswith("[2022-11-20 18:30] Alice\n\nAlice loves bouldering")
    assert json.loads(alice[1]) == ["friends", "climbing"] and json.loads(alice[2]) == ["Alice"]
    assert not any("Obsidian settings" in t for t in texts)
    # Imported again: nothing new.
    again = aokun_in_process("import", DATA / "notes", "--config", config)
    assert again.stdout.strip().endswith("imported 0, already present 8, skipped 1 (9 rows, markdown, "
                                         f"from {DATA / 'notes'})")
    assert db_rows(config, "SELECT COUNT(*) FROM documents") == [(8,)]


@pytest.mark.slow
def test_mcp_memory_file_one_memory_per_observation_and_relation(tmp_path):
    config = store(tmp_path, "mcp")
    done = aokun_in_process("import", DATA / "memory.jsonl", "--persona", "me", "--config", config)
    assert last_line(done).startswith("imported 6, already present 0, skipped 0 (6 rows, mcp-memory")
    rows = db_rows(config, "SELECT text, participants, topics, key_facts, persona_id FROM documents ORDER BY id")
    assert [(r[0].split("] ", 1)[1], json.loads(r[1]), json.loads(r[2]), json.loads(r[3]), r[4]) for r in rows] == [
        ("John_Smith: Speaks fluent Spanish", ["John_Smith"], ["person"], [], "me"),
        ("John_Smith: Graduated in 2019", ["John_Smith"], ["person"], [], "me"),
        ("Anthropic: Builds the Claude models", [], ["organization"], [], "me"),  # not a person
        ("Maria_Garcia: Prefers morning meetings", ["Maria_Garcia"], ["person"], [], "me"),
        ("John_Smith works at Anthropic", ["John_Smith", "Anthropic"], [], ["John_Smith works at Anthropic"], "me"),
        ("Maria_Garcia mentors John_Smith", ["Maria_Garcia", "John_Smith"], [],
         ["Maria_Garcia mentors John_Smith"], "me"),
    ]
    # The progress bar shows on a terminal or with --progress only.
    assert aokun_in_process("import", DATA / "memory.jsonl", "--persona", "me", "--config", config).stderr == ""
    again = aokun_in_process("import", DATA / "memory.jsonl", "--persona", "me", "--progress", "--config", config)
    assert last_line(again).startswith("imported 0, already present 6") and "6/6" in again.stderr
    empty = aokun_in_process("import", DATA / "memory.jsonl", "--persona", " ", "--config", config)
    assert empty.returncode == 2 and "--persona is empty" in empty.stderr
    # For another persona the same file is other memories.
    assert last_line(aokun_in_process("import", DATA / "memory.jsonl", "--config", config)).startswith(
        "imported 6, already present 0")


def test_bad_rows_are_reported_by_line_and_skipped(tmp_path):
    config = store(tmp_path, "bad")
    rows = [
        json.dumps({"format": "aokun-export", "version": 1}),
        json.dumps({"text": "A good row about growing tomatoes on the balcony"}),
        '{"text": "cut off',
        json.dumps({"text": "too important", "importance": 1.5}),
        json.dumps({"text": "   "}),
        json.dumps({"txt": "a typo"}),
        json.dumps({"text": "archived without a time", "archived": True}),
        "",
        json.dumps({"text": "Another good row, about sourdough bread", "topics": ["baking"],
                    "original_time": "2024-02-03"}),
        "[1, 2]",
        json.dumps({"text": "a bad date", "original_time": "yesterday"}),
        json.dumps({"text": "x" * 20_001}),
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    result = aokun_in_process("import", path, "--config", config)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "searchable by words: all; by meaning: 2 memories wait and no worker is running (start one: aokun run,"
        " or aokun-worker) (aokun status --follow shows it as it goes)",
        f"imported 2, already present 0, skipped 8 (10 rows, jsonl, from {path})"]
    errors = result.stderr.strip().splitlines()
    assert [e.split(": ", 2)[1] for e in errors] == [f"rows.jsonl line {n}" for n in (3, 4, 5, 6, 7, 10, 11, 12)]
    assert all(e.startswith("aokun import: ") and e.endswith("; skipped") for e in errors)
    assert "not JSON: Unterminated string" in errors[0]
    assert "importance: must be at most 1 (got 1.5)" in errors[1]
    # The memory service's rules, in its words: the same as memorize's.
    assert "content is empty: give the text to remember" in errors[2]
    assert "unknown key 'txt'; a row holds id, text, topics" in errors[3]
    assert "archived needs create_time (epoch seconds) in the same row" in errors[4]
    assert "not a JSON object" in errors[5]
    assert "original_time: must be an ISO-8601 date" in errors[6]
    assert "content is 20001 characters; the limit is 20000 (server.max_content_chars)" in errors[7]
    stored = db_rows(config, "SELECT text, topics FROM documents ORDER BY id")
    assert [s[0] for s in stored][1] == "[2024-02-03] Another good row, about sourdough bread"
    assert stored[0][0].endswith("] A good row about growing tomatoes on the balcony")


def test_bad_lines_of_an_mcp_memory_file(tmp_path):
    config = store(tmp_path, "mcp")
    path = tmp_path / "memory.jsonl"
    path.write_text("\n".join([
        json.dumps({"type": "entity", "name": "Ann", "entityType": "person", "observations": ["Runs marathons", 7]}),
        json.dumps({"type": "relation", "from": "Ann", "relationType": "knows"}),
        json.dumps({"type": "note", "text": "?"}),
        "not json",
        json.dumps({"type": "relation", "from": "Ann", "to": "Ben", "relationType": "is_friends_with"}),
    ]), encoding="utf-8")
    result = aokun_in_process("import", path, "--format", "mcp-memory", "--config", config)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1].startswith("imported 2, already present 0, skipped 4")
    assert result.stderr.strip().splitlines() == [
        "aokun import: memory.jsonl line 1 observation 2: an observation must be a non-empty string; skipped",
        "aokun import: memory.jsonl line 2: a relation needs from, to and relationType, each a non-empty string;"
        " skipped",
        "aokun import: memory.jsonl line 3: type must be entity or relation (got 'note'); skipped",
        "aokun import: memory.jsonl line 4: not JSON: Expecting value (column 1); skipped",
    ]
    assert [t.split("] ", 1)[1] for (t,) in db_rows(config, "SELECT text FROM documents ORDER BY id")] == [
        "Ann: Runs marathons", "Ann is friends with Ben"]


@pytest.mark.parametrize("content, message", [
    ("just some words\n", "cannot tell what"),
    (json.dumps({"format": "aokun-export", "version": 99}) + "\n",
     "is export format version 99; this Aokun reads up to 1"),
])
def test_files_that_cannot_be_imported_are_refused_in_one_line(tmp_path, content, message):
    config = store(tmp_path, "s")
    path = tmp_path / "x.jsonl"
    path.write_text(content, encoding="utf-8")
    result = aokun_in_process("import", path, "--config", config)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    missing = aokun_in_process("import", tmp_path / "nothing.jsonl", "--config", config)
    assert missing.returncode == 2 and "not found: give the file" in missing.stderr
