"""`aokun hook` run as a host runs it (its main(), in the test process, with the host's
environment and stdin), and the JSON Claude Code gives it for a prompt: for tests/test_hook.py
and tests/process/test_hook_front.py."""

from __future__ import annotations

import json
import os
import subprocess

from helpers import aokun_in_process


def hook(config, *args: str, stdin: str | None = None, cwd=None) -> subprocess.CompletedProcess:
    """`aokun hook ARGS --config CONFIG` (no --config when None), AOKUN_CONFIG unset."""
    env = {k: v for k, v in os.environ.items() if k != "AOKUN_CONFIG"}
    given = ["--config", str(config)] if config is not None else []
    return aokun_in_process("hook", *args, *given, stdin=stdin or "", env=env, cwd=cwd)


def prompt_json(prompt: str) -> str:
    return json.dumps({"session_id": "abc", "transcript_path": "/tmp/none.jsonl", "cwd": "/tmp",
                       "hook_event_name": "UserPromptSubmit", "prompt": prompt})
