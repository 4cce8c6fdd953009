"""Conversation context: which earlier memories a memory is indexed together with.

Hosts often memorize a conversation turn by turn, and a turn alone is often meaningless
("Yes! Last Saturday, with the kids"). A memory's neighbours are the memories stored just
before it in the same conversation whose times lie within a short window of its own
(original_time where given, else when it was stored): its context. A conversation is a shared
persona and session; without a session_id, the turns of one dialogue: the same persona and
the same named participants, or, with none named, speaker-labelled turns ("Melanie: …").
Facts stored without any of these are nobody's context, however close in time (a dentist
appointment and a quokka fact saved a minute apart are unrelated). The context's words go
into the BM25 row's second column; recall still returns the memory itself.

The links are kept (memory_context), so that editing or deleting a neighbour re-indexes the
memories that carried its words: a deleted memory's words leave every index.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from shared.store.portable.connection import Connection


def before(conn: Connection, persona_id: str | None, session_id: str | None,
           moment: float, limit: int, window_s: float, before_id: int | None = None,
           participants: Sequence[str] = (), text: str = "") -> list[tuple[int, str]]:
    """(id, text) of up to `limit` memories stored before `before_id` (or last) in the same
    conversation (module docstring), nearest first, each within window_s of the one after
    it, starting from `moment`. The walk stops at the first gap: a conversation's turns are
    contiguous."""
    dialogue = dialogue_of(participants, text)
    if limit <= 0 or (session_id is None and dialogue is None):
        return []
    # Walk one index a few rows back: the session's when there is one, else the persona's
    # (a row of another session there ends the walk, as a gap does).
    column, value = ("session_id", session_id) if session_id is not None else ("persona_id", persona_id)
    same, params = (f"{column} = ?", (value,)) if value is not None else (f"{column} IS NULL", ())
    rows = conn.execute(
        "SELECT id, text, persona_id, session_id, archived, participants,"
        " COALESCE(original_ts, create_time) AS moment FROM documents"
        f" WHERE {same} AND id < ? ORDER BY id DESC LIMIT ?",
        (*params, before_id if before_id is not None else 2 ** 62, limit)).fetchall()
    found: list[tuple[int, str]] = []
    last = moment
    for row in rows:
        other_dialogue = session_id is None and dialogue_of(json.loads(row["participants"]), row["text"]) != dialogue
        if (row["persona_id"] != persona_id or row["session_id"] != session_id or row["archived"]
                or other_dialogue or abs(last - row["moment"]) > window_s):
            break
        found.append((row["id"], row["text"]))
        last = row["moment"]
    return found


# "[2023-05-08 13:56] Melanie: …", "王芳：…": a speaker label of up to three words.
_SPEAKER_TURN = re.compile(r"^(?:\[[^\]]*\]\s*)?[^\s:：\[\]]+(?: [^\s:：]+){0,2}\s?[:：]\s")


def dialogue_of(participants: Sequence[str], text: str) -> frozenset[str] | None:
    """Which dialogue a memory stored without a session_id belongs to: its named participants,
    else (an empty set) any dialogue of speaker-labelled turns, else none."""
    named = frozenset(p.strip().casefold() for p in participants if p.strip())
    if named:
        return named
    return frozenset() if _SPEAKER_TURN.match(text) else None


def link(tx: Connection, memory_id: int, neighbour_ids: Sequence[int]) -> None:
    """Record a memory's neighbours (replacing any it had), nearest first."""
    tx.execute("DELETE FROM memory_context WHERE memory_id = ?", (memory_id,))
    tx.executemany("INSERT INTO memory_context (memory_id, neighbour_id, position) VALUES (?, ?, ?)",
                   [(memory_id, n, position) for position, n in enumerate(neighbour_ids)])


# A link counts while both memories are still in one conversation: a memory moved to another
# persona or session lends its words to none of its old neighbours' rows and vectors, and
# takes none from them (the memory service also unlinks it and re-indexes those that held
# it). Portable SQL; `c` is memory_context, `m` the memory, `d` its neighbour.
IN_CONVERSATION = (
    "JOIN documents m ON m.id = c.memory_id JOIN documents d ON d.id = c.neighbour_id"
    " AND (d.persona_id = m.persona_id OR (d.persona_id IS NULL AND m.persona_id IS NULL))"
    " AND (d.session_id = m.session_id OR (d.session_id IS NULL AND m.session_id IS NULL))")


def of(conn: Connection, memory_id: int) -> list[tuple[int, str]]:
    """(id, text) of a memory's neighbours still in its conversation, nearest first."""
    return [(r[0], r[1]) for r in conn.execute(
        f"SELECT d.id, d.text FROM memory_context c {IN_CONVERSATION}"
        " WHERE c.memory_id = ? ORDER BY c.position", (memory_id,))]


def dependents(conn: Connection, neighbour_id: int) -> list[int]:
    """Memories that carry this one's words in their context."""
    return [r[0] for r in conn.execute(
        "SELECT memory_id FROM memory_context WHERE neighbour_id = ? ORDER BY memory_id", (neighbour_id,))]


def unlink(tx: Connection, memory_id: int) -> list[int]:
    """Forget a memory's links both ways; return the memories that had it as a neighbour."""
    carriers = dependents(tx, memory_id)
    tx.execute("DELETE FROM memory_context WHERE memory_id = ? OR neighbour_id = ?", (memory_id, memory_id))
    return carriers

