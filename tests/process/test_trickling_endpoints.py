"""Whole-request deadlines for outbound calls: a chat or embedding endpoint that trickles a
byte a second, in its body or in its headers, never lets a per-read timeout expire; the request
must still end at summarizer.timeout_s / embedding.timeout_s. The caller runs in a real child
process, so a hang fails the test at its wait deadline instead of hanging the suite, against a
real trickling HTTP server on loopback (tests/fake_chat.py). tests/test_request_deadlines.py:
the deadline's own rules, in the test process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fake_chat import TrickleServer

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60  # how long the test waits for the child: generous, not a speed assertion

SUMMARIZE = textwrap.dedent("""
    import json, sys
    from datetime import datetime
    from pathlib import Path
    from shared.config import AppConfig, StorageConfig, SummarizerConfig, TextConfig
    from shared.live_config import LiveConfig
    from shared.extract.atomize import AtomRules
    from shared.store import open_store
    from shared.summarize.conversation import parse_conversation
    from shared.summarize.rules import RulesSummarizer
    from shared.summarize.summarizer import Summarizer
    from shared.text.segment import Segmenter

    base_url, data_dir = sys.argv[1], sys.argv[2]
    config = SummarizerConfig(provider="llm", base_url=base_url, model="fake-model", api_key="sk-test",
                              timeout_s=2, max_retries=2)
    store = open_store(StorageConfig(data_dir=Path(data_dir)))
    rules = RulesSummarizer(AtomRules.load(), Segmenter(TextConfig()))
    turns = parse_conversation("Caroline: I adopted a grey cat yesterday, her name is Luna.\\n"
                               "Melanie: I'm flying to Paris next Friday.", datetime(2023, 5, 8, 13, 56))
    result = Summarizer(store, rules, LiveConfig(AppConfig(summarizer=config))).summarize(turns)
    store.close()
    print(json.dumps({"provider": result.provider, "warnings": result.warnings}))
""")

EMBED = textwrap.dedent("""
    import json, sys
    from shared.embedders.openai import OpenAIEmbedder
    from shared.errors import EmbeddingError

    embedder = OpenAIEmbedder(sys.argv[1], "fake-embed", "", dimensions=8, timeout_s=2, max_retries=1,
                              backoff_s=0.01)
    try:
        embedder.embed_query("a cat named Luna")
    except EmbeddingError as exc:
        print(json.dumps({"error": str(exc)}))
    else:
        print(json.dumps({"error": None}))
""")


def run_child(script: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    try:
        done = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=WAIT_S)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the call was still waiting on the trickling server after {WAIT_S} s") from exc
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["body", "headers"])
def test_a_trickling_chat_endpoint_ends_in_the_rules_fallback(tmp_path, mode):
    with TrickleServer(mode) as api:
        result = run_child(SUMMARIZE, api.base_url, str(tmp_path / "data"))
        assert api.requests == 1  # a request that took the whole timeout is not repeated
        assert api.bytes_sent >= 1  # the server did trickle: every read saw a byte within a second
    assert result["provider"] == "rules"
    assert result["warnings"][0] == "llm provider failed (chat endpoint timed out after 2 s): rules summary used"


@pytest.mark.parametrize("mode", ["body", "headers"])
def test_a_trickling_embedding_endpoint_raises_the_embedding_error(mode):
    with TrickleServer(mode) as api:
        result = run_child(EMBED, api.base_url)
        assert api.requests == 2  # timeouts are retried for embeddings, each attempt cut at 2 s
    assert result["error"] == "embedding API timed out after 2 s (after 1 retry)"
