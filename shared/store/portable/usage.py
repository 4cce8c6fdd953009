"""Tokens spent on language models, per model: what memory_stats shows of the summarizer."""

from __future__ import annotations

from typing import Any

from shared.store.portable.connection import Connection


def record(conn: Connection, model: str, prompt_tokens: int, completion_tokens: int,
           failed: bool, now: float) -> None:
    """Count one call (inside the caller's write transaction). The columns of the stored row
    are named with their table: PostgreSQL finds a bare `calls` ambiguous (row or excluded)."""
    conn.execute(
        "INSERT INTO llm_usage (model, calls, prompt_tokens, completion_tokens, failures, last_time)"
        " VALUES (?, 1, ?, ?, ?, ?) ON CONFLICT (model) DO UPDATE SET calls = llm_usage.calls + 1,"
        " prompt_tokens = llm_usage.prompt_tokens + excluded.prompt_tokens,"
        " completion_tokens = llm_usage.completion_tokens + excluded.completion_tokens,"
        " failures = llm_usage.failures + excluded.failures, last_time = excluded.last_time",
        (model, int(prompt_tokens), int(completion_tokens), int(failed), now))


def figures(conn: Connection) -> dict[str, dict[str, Any]]:
    """{model: {calls, prompt_tokens, completion_tokens, failures}}."""
    return {row[0]: {"calls": row[1], "prompt_tokens": row[2], "completion_tokens": row[3],
                     "failures": row[4]}
            for row in conn.execute("SELECT model, calls, prompt_tokens, completion_tokens, failures"
                                    " FROM llm_usage ORDER BY model")}
