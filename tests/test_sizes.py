"""Sizes with limits: `aokun ingest` reads a transcript a line at a time
within its limits (shared/summarize/transcript_lines.py) and `aokun import` streams its rows,
through the real commands against a real database."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from claude_code import claude_line, claude_transcript
from helpers import aokun_in_process, db_rows, last_line, write_config
from shared.summarize.transcript_lines import MAX_FILE_BYTES, MAX_LINE_BYTES, MAX_TURN_CHARS

pytestmark = pytest.mark.slow


def test_an_over_long_line_is_skipped_naming_it_and_the_rest_ingested(tmp_path):
    config = write_config(tmp_path)
    path = claude_transcript(tmp_path / "session.jsonl")
    pasted = claude_line("user", "a pasted log " * (MAX_LINE_BYTES // 10), "2025-03-14T09:01:30.000Z")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(5, json.dumps(pasted))  # line 6
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = aokun_in_process("ingest", path, "--config", config)
    memory_id = int(last_line(result))
    warnings = [line for line in result.stderr.splitlines() if "line 6" in line]
    assert len(warnings) == 1 and "MB long" in warnings[0] and "skipped" in warnings[0], result.stderr
    assert "Traceback" not in result.stderr
    text, key_facts = db_rows(config, "SELECT text, key_facts FROM documents WHERE id = ?", (memory_id,))[0]
    assert "Luna" in text + key_facts and "green tea" in text + key_facts
    assert "pasted log" not in text + key_facts


def test_an_over_size_file_is_refused_in_one_line(tmp_path):
    config = write_config(tmp_path)
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as handle:  # sparse: the size is refused before anything is read
        handle.truncate(MAX_FILE_BYTES + 1)
    result = aokun_in_process("ingest", path, "--config", config)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "64.0 MB" in result.stderr and str(path) in result.stderr
    assert db_rows(config, "SELECT COUNT(*) FROM documents") in ([], [(0,)])  # no store, or empty


def test_a_huge_single_turn_is_summarized_from_its_start_saying_so(tmp_path):
    config = write_config(tmp_path)
    path = tmp_path / "chat.txt"
    sentence = "I went to the market with Anna and we plan to visit Paris next month. "
    path.write_text("Ann: I adopted a cat named Luna. " + sentence * (900_000 // len(sentence))
                    + "\nBo: nice\n", encoding="utf-8")
    result = aokun_in_process("ingest", path, "--dry-run", "--config", config)
    assert result.returncode == 0, result.stderr
    assert f"each summarized from its first {MAX_TURN_CHARS}" in result.stderr
    assert "Luna" in result.stdout


def test_a_big_import_is_streamed_in_bounded_memory_and_every_row_imported(tmp_path):
    """A 40 MB export whose lines are mostly JSON whitespace (cheap to import, costly to hold):
    the import's peak memory stays far below what reading the file whole took (3.5x its size)."""
    config = write_config(tmp_path)
    path = tmp_path / "big.jsonl"
    rows, padding = 400, " " * 100_000
    with path.open("w", encoding="utf-8") as handle:
        for i in range(rows):
            handle.write(f'{{"text": "Row {i} of the big import",{padding}"persona_id": "me"}}\n')
    size = path.stat().st_size
    # The import runs in a child of a child, so its peak RSS is its own (RUSAGE_CHILDREN of the
    # test process holds the largest child any earlier test waited for).
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    result = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "aokun_admin.main",
                             "import", str(path), "--config", str(config)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    code, peak_kb = map(int, lines[-1].split())
    assert code == 0, result.stdout + result.stderr
    assert lines[-2].startswith(f"imported {rows}, already present 0, skipped 0 ({rows} rows, jsonl")
    assert db_rows(config, "SELECT COUNT(*) FROM documents") == [(rows,)]
    print(f"import of {size / 2**20:.0f} MB: peak RSS {peak_kb / 1024:.0f} MB")
    assert peak_kb * 1024 < size + 150 * 1024 * 1024, (peak_kb, size)
