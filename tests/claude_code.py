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
