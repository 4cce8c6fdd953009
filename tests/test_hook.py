"""`aokun hook`: memories in a host's context without the host calling a tool.

Every test runs the real `aokun` command (its main(), in this process, with the environment
and stdin a host gives it) as Claude Code would (the hook's JSON on stdin) or in the plain
form, against memories stored through the real front (or the memory service), with the
worker's stages run here where atoms are needed (tests/process/test_hook_front.py: the hook
asking a real HTTP front).
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta, timezone

import pytest

from aokun_server.heartbeat import FrontHeartbeat
from fake_openai import FakeEmbeddingsServer
from helpers import (
    free_port,
    front_in_process,
    run_every_stage,
    seed_memories,
    write_config,
)
from hook_runs import hook, prompt_json
from shared.config import load_config
from shared.store import open_store

TEA = "I love green tea with jasmine every morning"
PEANUTS = "My daughter Mia is allergic to peanuts"
LISBON = "My sister Alice moved to Lisbon last spring"


def session_start_json(source: str = "startup") -> str:
    return json.dumps({"session_id": "abc", "transcript_path": "/tmp/none.jsonl", "cwd": "/tmp",
                       "hook_event_name": "SessionStart", "source": source})


def quiet_failure(done: subprocess.CompletedProcess) -> str:
    """A hook that failed: exit 0, nothing on stdout, one line on stderr (returned)."""
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("aokun hook: "), done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """Three memories of persona "me", memorized through the real front."""
    folder = tmp_path_factory.mktemp("hook")
    config = write_config(folder)
    with front_in_process(config) as s:
        ids = {text: s.ok("memorize", {"content": text, "metadata": {"persona_id": "me"}})["id"]
               for text in (TEA, PEANUTS, LISBON)}
    return config, ids


def test_a_relevant_prompt_prints_the_memory_within_the_budget(stored):
    config, ids = stored
    done = hook(config, "prompt", "--budget", "400", stdin=prompt_json("Is Mia allergic to peanuts?"))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Possibly relevant memories")
    assert any(line.startswith(f"[id {ids[PEANUTS]} · ") and line.endswith(PEANUTS) for line in lines[1:])
    assert len(done.stdout.rstrip("\n")) <= 400


def test_the_budget_keeps_whole_lines_only(stored):
    config, _ids = stored
    header_and_one = len("Possibly relevant memories (Aokun; [id · relevance 0-1], best first):") + 1 + 80
    done = hook(config, "prompt", "--min-score", "0", "--budget", str(header_and_one),
                stdin=prompt_json("peanuts, green tea, jasmine and Lisbon"))
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and len(done.stdout.rstrip("\n")) <= header_and_one, done.stdout
    assert lines[1].endswith((TEA, PEANUTS, LISBON))


def test_the_plain_form_takes_the_prompt_as_an_argument_or_on_stdin(stored):
    config, _ids = stored
    by_argument = hook(config, "prompt", "green tea with jasmine")
    by_stdin = hook(config, "prompt", "--plain", stdin="green tea with jasmine\n")
    assert TEA in by_argument.stdout and by_argument.stdout == by_stdin.stdout


def test_claude_codes_json_form(stored):
    config, _ids = stored
    done = hook(config, "prompt", "--json", stdin=prompt_json("Is Mia allergic to peanuts?"))
    output = json.loads(done.stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == "UserPromptSubmit"
    assert PEANUTS in output["additionalContext"]


def test_nothing_relevant_enough_prints_nothing_at_all(stored):
    config, _ = stored
    for args in (("--min-score", "0.99"), ("--persona", "someone-else")):
        done = hook(config, "prompt", *args, stdin=prompt_json("Is Mia allergic to peanuts?"))
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), args
    empty = hook(config, "prompt", stdin=prompt_json("   "))
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "", "")


def test_failures_never_break_the_host(tmp_path, stored):
    config, _ = stored
    broken = tmp_path / "broken.yaml"
    broken.write_text("storage: [unclosed\n", encoding="utf-8")
    assert "cannot read config file" in quiet_failure(hook(broken, "prompt", stdin=prompt_json("tea")))
    missing = write_config(tmp_path, storage={"data_dir": str(tmp_path / "nothing-here")})
    for event, stdin in (("prompt", prompt_json("tea")), ("session-start", session_start_json())):
        assert "no memory store at" in quiet_failure(hook(missing, event, stdin=stdin))
    assert not (tmp_path / "nothing-here").exists()  # a hook creates no store
    assert "not the hook's JSON" in quiet_failure(hook(config, "prompt", stdin="green tea please"))
    assert "no prompt" in quiet_failure(hook(config, "prompt", stdin=session_start_json()))
    assert "unrecognized arguments" in quiet_failure(hook(config, "prompt", "--bogus", stdin=prompt_json("x")))
    assert "invalid choice" in quiet_failure(hook(config, "pre-compact", stdin=prompt_json("x")))
    assert "--budget" in quiet_failure(hook(config, "prompt", "--budget", "0", stdin=prompt_json("x")))


def test_an_empty_store_has_no_profile(tmp_path):
    config = write_config(tmp_path)
    open_store(load_config(config).storage).close()
    done = hook(config, "session-start", stdin=session_start_json())
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.slow
def test_session_start_prints_pinned_memories_plans_and_preferences(tmp_path):
    """On the user's clock: a plan due at the end of a day in Los Angeles is that day's there
    (in UTC it is the next morning)."""
    now = datetime.now(timezone.utc).replace(second=0, microsecond=0, tzinfo=None)
    memories = ["I have a dentist appointment in three weeks", "I love hiking in the mountains",
                "My passport number ends in 4471", "It rained a lot today"]
    with FakeEmbeddingsServer(dim=32) as api:
        config = write_config(
            tmp_path, embedding={"provider": "openai", "base_url": api.base_url, "model": "fake",
                                 "dimensions": 32}, queue={"retry_base_s": 0.2},
            memory={"time_zone": "America/Los_Angeles"})
        with front_in_process(config) as s:
            ids = [s.ok("memorize", {"content": text, "metadata": {
                "persona_id": "me", "original_time": now.isoformat(), "pinned": "passport" in text}})["id"]
                   for text in memories]
        run_every_stage(config)
    done = hook(config, "session-start", "--persona", "me", "--budget", "600", stdin=session_start_json())
    assert done.returncode == 0 and done.stderr == "", done.stderr
    text = done.stdout
    assert text.startswith("What Aokun remembers about the user:\n")
    assert f"Pinned:\n- [id {ids[2]}] [" in text and "My passport number ends in 4471" in text
    due = (now + timedelta(weeks=3)).date().isoformat()  # original_time without an offset: on LA's clock
    assert f"Upcoming plans:\n- by {due}: " in text and "dentist appointment in three weeks" in text
    assert "Preferences:\n- " in text and "I love hiking in the mountains" in text
    assert "rained" not in text and len(text.rstrip("\n")) <= 600
    other = hook(config, "session-start", "--persona", "someone-else", stdin=session_start_json("resume"))
    assert (other.returncode, other.stdout, other.stderr) == (0, "", "")


def seeded(config, *texts: str) -> list[int]:
    return seed_memories(config, "me", *texts)


def test_a_front_that_does_not_answer_leaves_the_prompt_to_the_store(tmp_path):
    """A front whose heartbeat is fresh but where nothing answers at its endpoint: the hook
    says so with --verbose and recalls in its own process."""
    config = write_config(tmp_path)
    seeded(config, PEANUTS)
    store = open_store(load_config(config).storage)
    silent = FrontHeartbeat(store, 0.5, "http", f"http://127.0.0.1:{free_port()}/mcp")
    silent.start()  # this test's own process, alive: a live front whose port nothing listens on
    try:
        done = hook(config, "prompt", "--verbose", stdin=prompt_json("Is Mia allergic to peanuts?"))
        quiet = hook(config, "prompt", stdin=prompt_json("Is Mia allergic to peanuts?"))
    finally:
        silent.stop()
        store.close()
    assert done.returncode == 0 and PEANUTS in done.stdout
    assert "did not answer" in done.stderr and "from the store (" in done.stderr, done.stderr
    assert quiet.stdout == done.stdout and quiet.stderr == ""  # silent without --verbose
