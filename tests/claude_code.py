"""Claude Code session files as Claude Code writes them, for the tests that read them: one JSON
object a line, times in UTC with milliseconds and a Z."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path


def z_time(moment: datetime) -> str:
    """A time as Claude Code writes it: UTC, milliseconds, a Z."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def claude_line(kind: str, content, timestamp: str, *, session: str = "3f2a", uuid: str | None = None,
                message_id: str = "msg_1", **extra) -> dict:
    """One message line; an assistant's carries the model's message fields."""
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(model="claude-sonnet", id=message_id, type="message")
    return {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/home/me/project",
            "sessionId": session, "version": "2.1.12", "type": kind, "message": message,
            "uuid": uuid or f"u-{timestamp}", "timestamp": timestamp, **extra}


def write_lines(path: Path, lines: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n", encoding="utf-8")
    return path


def dated_transcript(path: Path, turns: list[tuple[str, str]], started: datetime, session: str = "s") -> Path:
    """A session of (user|assistant, text) turns 40 s apart from `started`; an assistant's text
    in a text block, as Claude Code writes it."""
    return write_lines(path, [
        claude_line(kind, text if kind == "user" else [{"type": "text", "text": text}],
                    z_time(started + timedelta(seconds=40 * n)), session=session, uuid=f"u-{n}",
                    message_id=f"msg_{n}")
        for n, (kind, text) in enumerate(turns)])


TOOL_WORD = "quixotrellis"  # only in tool calls and results: must never reach a memory
THOUGHT_WORD = "brambleworth"  # only in a thinking block


def claude_transcript(path: Path) -> Path:
    """A Claude Code session file as it writes them: messages, tool traffic, thinking, and
    lines that are no message at all."""
    lines = [
        {"type": "summary", "summary": "Cat adoption chat", "leafUuid": "x"},
        {"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}, "isSnapshotUpdate": False},
        claude_line("user", "<command-name>/clear</command-name>", "2025-03-14T09:00:00.000Z"),
        claude_line("user", "Caveat: local command output follows.", "2025-03-14T09:00:01.000Z", isMeta=True),
        claude_line("user", "I adopted a cat named Luna last week. I am going to take her to the vet tomorrow.",
                    "2025-03-14T09:01:00.000Z"),
        claude_line("assistant", [{"type": "thinking", "thinking": f"{THOUGHT_WORD} musing", "signature": "s"}],
                    "2025-03-14T09:01:05.000Z", message_id="msg_a"),
        claude_line("assistant", [{"type": "text", "text": "Congratulations on adopting Luna!"}],
                    "2025-03-14T09:01:06.000Z", message_id="msg_a"),
        claude_line("assistant", [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                   "input": {"command": f"grep {TOOL_WORD} notes.txt"}}],
                    "2025-03-14T09:01:07.000Z", message_id="msg_a"),
        claude_line("user", [{"type": "tool_result", "tool_use_id": "toolu_1",
                              "content": f"{TOOL_WORD}: vet appointments list"}],
                    "2025-03-14T09:01:08.000Z", toolUseResult={"stdout": TOOL_WORD}),
        claude_line("user", "Sub-agent prompt about the vet", "2025-03-14T09:01:09.000Z", isSidechain=True),
        claude_line("user", [{"type": "text", "text": "I prefer green tea over coffee."}],
                    "2025-03-14T09:02:00.000Z"),
        claude_line("assistant", [{"type": "text", "text": "Noted: green tea it is."}],
                    "2025-03-14T09:02:03.000Z", message_id="msg_b"),
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path
