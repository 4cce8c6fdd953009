"""Rows that used to crash or hang `aokun import` and `aokun ingest`: each is a
reported row error, through the real command, and every good row around it is imported.
Also the YAML reader that refuses alias bombs (shared/safe_yaml.py) and the config file read
with it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from helpers import db_rows, write_config
from shared.config import load_config
from shared.errors import ConfigError
from shared.safe_yaml import MAX_ALIASES, YamlRefused, safe_load

DEEP = "[" * 50_000 + "]" * 50_000
BOMB = ("l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        + "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
        + "title: *l8\n")


def aokun(config: Path, *args, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aokun_admin.main", *map(str, args), "--config", str(config)],
                          capture_output=True, text=True, timeout=120, input=stdin)


def texts(config: Path) -> list[str]:
    return [t.split("] ", 1)[-1] for (t,) in db_rows(config, "SELECT text FROM documents ORDER BY id")]


def test_an_export_mixing_good_rows_with_each_bad_kind_imports_every_good_row(tmp_path):
    (tmp_path / "s").mkdir()
    config = write_config(tmp_path / "s")
    lines = [
        json.dumps({"text": "Good row one: the balcony tomatoes"}).encode(),
        DEEP.encode(),
        json.dumps({"text": "x", "create_time": 1e300}).encode(),
        json.dumps({"text": "Good row two: sourdough on Sundays"}).encode(),
        b'{"text": "caf\xff bad byte"}',
        json.dumps({"text": "far future", "original_time": "9999-12-31T23:59:00-23:59"}).encode(),
        json.dumps({"text": "x", "create_time": 1.0, "access_count": 1e300}).encode(),
        json.dumps({"text": "Good row three: the train to Kyoto"}).encode(),
    ]
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    result = aokun(config, "import", path)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout.splitlines()[-1].startswith("imported 3, already present 0, skipped 5")
    errors = result.stderr.strip().splitlines()
    assert [e.split(": ", 2)[1] for e in errors] == [f"rows.jsonl line {n}" for n in (2, 3, 5, 6, 7)]
    assert "nested too deeply" in errors[0]
    assert "create_time 1e+300 is out of range" in errors[1]
    assert "not valid UTF-8: byte 0xff at byte 14 of the line" in errors[2]
    assert "surrogate" not in errors[2]
    assert "original_time: 9999-12-31T23:59:00-23:59 is out of range" in errors[3]
    assert "access_count must be a number from 0 to 2**53" in errors[4]
    assert texts(config) == ["Good row one: the balcony tomatoes", "Good row two: sourdough on Sundays",
                             "Good row three: the train to Kyoto"]


def test_an_mcp_memory_file_with_a_deeply_nested_line_and_a_bad_byte(tmp_path):
    (tmp_path / "s").mkdir()
    config = write_config(tmp_path / "s")
    path = tmp_path / "memory.jsonl"
    path.write_bytes(b"\n".join([
        DEEP.encode(),
        json.dumps({"type": "entity", "name": "Ann", "entityType": "person",
                    "observations": ["Runs marathons"]}).encode(),
        b'{"type": "entity", "name": "B\xc3", "observations": ["x"]}',
        json.dumps({"type": "relation", "from": "Ann", "to": "Ben", "relationType": "knows"}).encode(),
    ]))
    result = aokun(config, "import", path, "--format", "mcp-memory")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 2
    assert errors[0].startswith("aokun import: memory.jsonl line 1: nested too deeply")
    assert errors[1].startswith("aokun import: memory.jsonl line 3: not valid UTF-8: byte 0xc3 at byte 30")
    assert texts(config) == ["Ann: Runs marathons", "Ann knows Ben"]
    # Detecting the format reads past the deep line too.
    assert aokun(config, "import", path).returncode == 1


def test_an_alias_bomb_note_is_refused_quickly_and_named(tmp_path):
    (tmp_path / "s").mkdir()
    config = write_config(tmp_path / "s")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bomb.md").write_text(f"---\n{BOMB}---\n\nlol\n", encoding="utf-8")
    (notes / "latin1.md").write_bytes(b"# Caf\xe9\n\nNot UTF-8.\n")
    (notes / "fine.md").write_text("---\ntags: [garden]\n---\n\nThe tomatoes ripened in August.\n",
                                   encoding="utf-8")
    started = time.monotonic()
    result = aokun(config, "import", notes)  # the 120 s timeout is the deadline: no hang
    assert time.monotonic() - started < 120
    assert result.returncode == 1, result.stderr
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 2
    assert errors[0].startswith("aokun import: bomb.md:1: front matter refused: it uses more than")
    assert errors[1] == ("aokun import: latin1.md:1: not valid UTF-8: byte 0xe9 at byte 6 of the line;"
                         " save the note as UTF-8 text; skipped")
    assert texts(config) == ["fine\n\nThe tomatoes ripened in August."]


def test_a_note_dated_out_of_range_is_a_bad_row(tmp_path):
    (tmp_path / "s").mkdir()
    config = write_config(tmp_path / "s")
    note = tmp_path / "far.md"
    note.write_text("---\ndate: '9999-12-31T23:59-23:59'\n---\n\nText.\n", encoding="utf-8")
    result = aokun(config, "import", note)
    assert result.returncode == 1
    assert "far.md:1: front matter refused" not in result.stderr
    assert "is out of range: give a time in the years 1900 to 2200" in result.stderr


@pytest.mark.parametrize("body, problem", [
    (DEEP, "nested too deeply"),
    ('{"speaker": "Ann", "text": "hi"}\n' + DEEP + '\n{"speaker": "Ben", "text": "yo"}\n',
     "line 2 is nested too deeply"),
])
def test_ingest_reports_a_deeply_nested_transcript_in_one_line(tmp_path, body, problem):
    (tmp_path / "s").mkdir()
    config = write_config(tmp_path / "s")
    path = tmp_path / "t.jsonl"
    path.write_text(body, encoding="utf-8")
    result = aokun(config, "ingest", path, "--dry-run")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert problem in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_ingest_names_invalid_utf8_with_its_line_and_byte(tmp_path):
    (tmp_path / "s").mkdir()
    config = write_config(tmp_path / "s")
    path = tmp_path / "t.txt"
    path.write_bytes(b"Ann: hello\nBen: caf\xe9\n")
    result = aokun(config, "ingest", path, "--dry-run")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "not valid UTF-8: byte 0xe9 at line 2, byte 9" in result.stderr


# -- the YAML reader ------------------------------------------------------------------------


def test_safe_load_reads_ordinary_yaml_and_a_few_aliases():
    assert safe_load("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}
    assert safe_load("") is None


@pytest.mark.parametrize("text, problem", [
    (BOMB, f"more than {MAX_ALIASES} YAML aliases"),
    ("big: &b [" + ", ".join(["x"] * 10_000) + "]\n" + "".join(f"k{i}: *b\n" for i in range(15)),
     "expands to more than"),
    ("a: &a [*a]\n", "refers to itself"),
    ("a: " + "[" * 50_000, "nested too deeply"),
])
def test_safe_load_refuses_documents_that_expand(text, problem):
    with pytest.raises(YamlRefused, match=problem):
        safe_load(text)


def test_a_config_file_with_an_alias_bomb_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(BOMB, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert str(path) in str(caught.value) and "aliases" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert yaml.safe_load("a: 1") == {"a": 1}


def test_ingest_refuses_a_turn_time_out_of_range(tmp_path):
    (tmp_path / "s").mkdir()
    config = write_config(tmp_path / "s")
    path = tmp_path / "t.jsonl"
    path.write_text('{"speaker": "Ben", "text": "yo", "time": "9999-12-31T23:59-23:59"}\n', encoding="utf-8")
    result = aokun(config, "ingest", path, "--dry-run")
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        f"aokun ingest: {path}: turn 1's time: 9999-12-31T23:59:00-23:59 is out of range: "
        "give a time in the years 1900 to 2200 (UTC)"]
