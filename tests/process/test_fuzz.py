"""Every input path survives generated garbage: random bytes, invalid UTF-8, lone
surrogates, NULs, nesting 50,000 deep, huge numbers and strings, wrong JSON-RPC shapes and tool
calls with garbage arguments, thrown at a real stdio front, a real HTTP front, `aokun import`
and `aokun ingest`. Each process keeps serving (or ends with one line, no traceback) and
everything it acknowledged is in the store. The generator and the checks are scripts/fuzz.py's,
which runs the same for minutes (`scripts/fuzz.py --seconds 180`); here a fixed seed and a few
cases per target, so a failure names its seed and reruns the same."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import fuzz
from helpers import BIN, write_config

SEED = 2107


@pytest.fixture
def tally():
    t = fuzz.Tally()
    yield t
    print(t.report())


@pytest.mark.slow
def test_stdio_front_survives_garbage_lines(tmp_path, tally):
    fuzz.fuzz_stdio(tmp_path, SEED, 22, tally)  # raises fuzz.Finding naming the seed and case
    assert set(tally.tried["stdio"]) == set(fuzz.KINDS_RPC)


@pytest.mark.slow
def test_http_front_survives_garbage_bodies(tmp_path, tally):
    fuzz.fuzz_http(tmp_path, SEED, 22, tally)
    assert set(tally.tried["http"]) == set(fuzz.KINDS_RPC)


@pytest.mark.slow
def test_import_reports_garbage_rows_and_imports_every_valid_one(tmp_path, tally):
    fuzz.fuzz_import(tmp_path, SEED, 40, tally)
    assert set(tally.tried["import"]) == set(fuzz.KINDS_ROW)


@pytest.mark.slow
def test_ingest_ends_in_one_line_on_garbage_transcripts(tmp_path, tally):
    kinds = fuzz.KINDS_TRANSCRIPT
    fuzz.fuzz_ingest(tmp_path, SEED, len(kinds), tally, kinds=kinds, parallel=4, big=100_000)
    assert set(tally.tried["ingest"]) == set(kinds)


@pytest.mark.slow
@pytest.mark.parametrize("body", [
    '[{"speaker":"\\udfff","text":"hello there"}]',  # in a speaker's name
    '[{"speaker":"Ann","text":"hello \\ud800 there"}]',  # in a turn's text
], ids=["speaker", "text"])
def test_ingest_lone_surrogate_in_a_transcript_is_replaced_and_stored(tmp_path, body):
    config = write_config(tmp_path)
    path = tmp_path / "turns.json"
    path.write_text(body, encoding="utf-8")
    result = subprocess.run([str(BIN / "aokun"), "ingest", str(path), "--config", str(config)],
                            capture_output=True, text=True, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 0, result.stderr
    assert lines[0] == f"aokun ingest: {path}: 1 invalid character(s) (lone UTF-16 surrogates) replaced with U+FFFD"
    assert result.stdout.strip().splitlines()[-1].isdigit(), result.stdout  # stored: its id
