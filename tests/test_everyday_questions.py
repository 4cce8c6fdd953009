"""What people actually ask, through the real `aokun` command and the official MCP client.

A question about a time window ("what do I have next week?", 我下周有什么安排？) asked in the
host's prompt hook (the real CLI, recalling by itself) answers with the plans of that
week first, as recall over the MCP client does. A Claude Code session with "Z" timestamps and
turns naming dates, ingested by the real `aokun ingest --from-hook`, gives plans that the
session-start profile lists on the user's day and recall finds in their window.

The user's clock is pinned (memory.time_zone, Los Angeles: its days end in the next UTC day),
and every date is built from today on that clock. The MCP front and the `aokun` command run
in this process; the stages a worker would run are run here by the worker's own runner.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from claude_code import dated_transcript
from fake_openai import FakeEmbeddingsServer
from helpers import aokun_as_a_host, front_in_process, run_every_stage, write_config

ZONE = "America/Los_Angeles"
LA = ZoneInfo(ZONE)


def config_in_los_angeles(folder: Path, api) -> Path:
    return write_config(
        folder, memory={"time_zone": ZONE},
        embedding={"provider": "openai", "base_url": api.base_url, "model": "fake", "dimensions": 32},
        server={"exposed_tools": ["memorize", "recall"]},
        retrieval={"access_reinforcement": False, "cache_enabled": False})


def en(day: date) -> str:
    return f"{day:%B} {day.day}"


def zh(day: date) -> str:
    return f"{day.month}月{day.day}日"


def next_week(today: date) -> tuple[date, date]:
    monday = today - timedelta(days=today.weekday()) + timedelta(weeks=1)
    return monday, monday + timedelta(days=6)


# -- a time window, asked in the prompt hook and over MCP --------------------------------------


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """Plans (next week, next month) and other memories, each told days before; the in-process
    front, {key: id}, {key: the plan's day}, the config."""
    now = datetime.now(LA).replace(microsecond=0)
    today = now.date()
    monday, _ = next_week(today)
    days = {"dentist": monday + timedelta(days=1), "checkup": monday + timedelta(days=4),
            "kyoto": today + timedelta(days=35)}
    memories = {
        "dentist": (f"Dentist appointment on {en(days['dentist'])} at 3pm.", 3),
        "checkup": (f"{zh(days['checkup'])}去医院做体检。", 1),
        "kyoto": (f"Flying to Kyoto for the cherry blossoms on {en(days['kyoto'])}.", 5),
        "marathon": ("I ran the city marathon in 3 hours 50 minutes.", 40),
        "sister": ("My sister Mia lives in Boston and I have to call her.", 60),
    }
    folder = tmp_path_factory.mktemp("window")
    with FakeEmbeddingsServer(dim=32) as api:
        config = config_in_los_angeles(folder, api)
        with front_in_process(config) as model:
            ids = {key: model.ok("memorize", {"content": text, "metadata": {
                "original_time": (now - timedelta(days=days_ago)).isoformat()}})["id"]
                for key, (text, days_ago) in memories.items()}
            run_every_stage(config)
            yield model, ids, days, today, config


def plans_between(days: dict, ids: dict, first: date, last: date) -> list[int]:
    return [ids[key] for key, day in sorted(days.items(), key=lambda item: item[1]) if first <= day <= last]


def hooked_ids(config: Path, question: str) -> list[int]:
    """The memories `aokun hook prompt` prints for a question, in its order."""
    hook = json.dumps({"session_id": "s", "transcript_path": "/tmp/none.jsonl", "cwd": "/tmp",
                       "hook_event_name": "UserPromptSubmit", "prompt": question})
    done = aokun_as_a_host(config, "hook", "prompt", stdin=hook)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return [int(found) for found in re.findall(r"^\[id (\d+) · ", done.stdout, re.MULTILINE)]


@pytest.mark.parametrize("question", ["What do I have next week?", "我下周有什么安排？"])
def test_next_week_in_the_prompt_hook_answers_next_weeks_plans_first(plans, question):
    model, ids, days, today, config = plans
    expected = plans_between(days, ids, *next_week(today))
    assert len(expected) == 2
    # The hook recalls by itself (no front runs): it reads the window on the user's clock.
    assert hooked_ids(config, question)[:2] == expected
    recalled = model.ok("recall", {"query": question, "k": 5})["results"]
    assert [r["id"] for r in recalled][:2] == expected


# -- a dated Claude Code session, ingested by the hook's command --------------------------------


def test_a_dated_session_ingested_from_the_hook_gives_plans_that_are_found(tmp_path):
    now = datetime.now(LA).replace(microsecond=0)
    berlin, shanghai = now.date() + timedelta(days=20), now.date() + timedelta(days=40)
    turns = [("user", f"I'm moving to Berlin on {en(berlin)}, I can't wait."),
             ("assistant", "That's exciting! Do you need help planning the move?"),
             ("user", f"我{zh(shanghai)}要去上海见我妈妈。"),
             ("assistant", "Have a good trip to Shanghai.")]
    transcript = dated_transcript(tmp_path / "session.jsonl", turns, now - timedelta(minutes=5), session="moving")
    hook = json.dumps({"session_id": "moving", "transcript_path": str(transcript), "cwd": str(tmp_path),
                       "hook_event_name": "SessionEnd", "reason": "exit"})
    with FakeEmbeddingsServer(dim=32) as api:
        config = config_in_los_angeles(tmp_path, api)
        done = aokun_as_a_host(config, "ingest", "--from-hook", stdin=hook)
        assert done.returncode == 0 and done.stderr == "", done.stdout + done.stderr
        memory_id = int(done.stdout.strip().splitlines()[-1])
        run_every_stage(config)

        # The profile a new session starts with lists both plans on the user's day (a plan is
        # due at the end of its day in Los Angeles, which is the next day in UTC).
        started = json.dumps({"session_id": "next", "hook_event_name": "SessionStart", "source": "startup"})
        profile = aokun_as_a_host(config, "hook", "session-start", stdin=started)
        assert profile.returncode == 0 and profile.stderr == "", profile.stderr
        plans = profile.stdout.partition("Upcoming plans:\n")[2]
        assert re.search(rf"^- by {berlin.isoformat()}: .*Berlin", plans, re.MULTILINE), profile.stdout
        assert re.search(rf"^- by {shanghai.isoformat()}: .*上海", plans, re.MULTILINE), profile.stdout

        with front_in_process(config) as model:
            for day in (berlin, shanghai):
                window = {"happens_after": day.isoformat(), "happens_before": day.isoformat()}
                found = model.ok("recall", {"query": "plans", **window})["results"]
                assert [r["id"] for r in found] == [memory_id], day
            elsewhere = {"happens_after": (berlin + timedelta(days=1)).isoformat(),
                         "happens_before": (shanghai - timedelta(days=1)).isoformat()}
            assert model.ok("recall", {"query": "plans", **elsewhere})["results"] == []
