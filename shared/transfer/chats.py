"""Chat exports — ChatGPT's and Claude's conversations.json — as conversations of turns.

Both are one JSON array of conversations (shared/transfer/json_array.py reads it an item at a time):

- ChatGPT (Settings > Data controls > Export data): {id / conversation_id, title, create_time,
  update_time (epoch seconds), mapping: {node id: {message, parent, children}}, current_node}.
  The mapping is a tree: every edit or regenerated answer is a branch. The branch the user
  kept is current_node followed back through its parents. A message is {author: {role},
  content: {content_type, parts}, create_time, recipient, metadata}; the user's and the
  assistant's text and multimodal_text messages are the conversation; system prompts, custom
  instructions, tool calls and their output (an assistant message to a recipient other than
  "all", a tool's), reasoning and hidden messages are not.
- Claude (Settings > Privacy > Export data): {uuid, name, created_at, updated_at (ISO-8601),
  chat_messages: [{sender: "human" | "assistant", text, content: [{type, text}, ...],
  created_at}]}, in order. The text blocks of content are the message (tool use and results
  are not); `text` where content has none.

Speakers are the transcript roles "user" and "assistant" (shared/extract/subjects.py), so the
user's statements become facts about the user and the assistant's none. Pure: no file or
database access.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TypeGuard

from shared.summarize.conversation import Turn
from shared.transfer.rows import BadRow, undecodable

FORMATS = ("chatgpt", "claude")
ASSISTANTS = {"chatgpt": "ChatGPT", "claude": "Claude"}
USER, ASSISTANT = "user", "assistant"
_CHATGPT_TEXT = ("text", "multimodal_text")


@dataclass(frozen=True)
class Conversation:
    where: str
    id: str
    title: str
    assistant: str              # ChatGPT, Claude
    created: datetime | None    # ChatGPT's in UTC; Claude's as written
    updated: datetime | None
    turns: list[Turn]


def detect(item: object) -> str | None:
    """chatgpt or claude by what the first conversation holds; None when neither."""
    if isinstance(item, dict):
        if "mapping" in item:
            return "chatgpt"
        if "chat_messages" in item:
            return "claude"
    return None


def where(name: str, index: int, item: object) -> str:
    """How a report names a conversation: the file, its number, and its title and id when it has them."""
    here = f"{name} conversation {index + 1}"
    if not isinstance(item, dict):
        return here
    title = item.get("title") if "mapping" in item else item.get("name")
    ident = item.get("conversation_id") or item.get("id") or item.get("uuid")
    named = [f"“{' '.join(title.split())[:60]}”" if isinstance(title, str) and title.strip() else "",
             f"id {ident[:60]}" if isinstance(ident, str) and ident.strip() else ""]
    named = [n for n in named if n]
    return f"{here} ({', '.join(named)})" if named else here


def conversation(fmt: str, item: object, here: str) -> Conversation | BadRow:
    """One conversation of an export in `fmt`, or why it cannot be imported."""
    if not isinstance(item, dict):
        return BadRow(here, f"not a conversation: a JSON object is expected (got {type(item).__name__})")
    try:
        found = _chatgpt(item, here) if fmt == "chatgpt" else _claude(item, here)
    except ValueError as exc:
        return BadRow(here, str(exc))
    for turn in found.turns:
        bad = undecodable(turn.text)
        if bad:
            return BadRow(here, bad.replace(" of the line", " of the message"))
    if not found.turns:
        return BadRow(here, "no messages: nothing the user or the assistant wrote")
    return found


# -- ChatGPT --------------------------------------------------------------------------------


def _chatgpt(item: dict, here: str) -> Conversation:
    ident = item.get("conversation_id") or item.get("id")
    mapping, node_id = item.get("mapping"), item.get("current_node")
    if not _text(ident):
        raise ValueError("no id: a ChatGPT conversation has conversation_id or id")
    if not isinstance(mapping, dict):
        raise ValueError("mapping must be an object of message nodes")
    turns: list[Turn] = []
    seen: set[str] = set()
    if node_id is None and mapping:  # an export without current_node: its latest leaf
        node_id = _latest_leaf(mapping)
    while node_id is not None:
        if not isinstance(node_id, str) or node_id not in mapping:
            raise ValueError(f"current_node's branch is broken: node {str(node_id)[:60]!r} is not in the mapping")
        if node_id in seen:
            raise ValueError(f"current_node's branch is broken: node {node_id[:60]!r} is its own ancestor (a loop)")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise ValueError(f"mapping[{node_id[:60]!r}] must be an object")
        turn = _chatgpt_turn(node.get("message"))
        if turn is not None:
            turns.append(turn)
        node_id = node.get("parent")
    turns.reverse()
    return Conversation(here, ident, _title(item.get("title")), ASSISTANTS["chatgpt"],
                        _epoch(item.get("create_time"), "create_time"),
                        _epoch(item.get("update_time"), "update_time"), turns)


def _latest_leaf(mapping: dict) -> str | None:
    leaves = [(_message_time(node), key) for key, node in mapping.items()
              if isinstance(node, dict) and not node.get("children")]
    return max(leaves)[1] if leaves else None


def _message_time(node: dict) -> float:
    message = node.get("message")
    moment = message.get("create_time") if isinstance(message, dict) else None
    return moment if isinstance(moment, (int, float)) and not isinstance(moment, bool) else 0.0


def _chatgpt_turn(message: object) -> Turn | None:
    """The message as a turn, or None for what is no conversation (module docstring)."""
    if not isinstance(message, dict):
        return None
    author, content, metadata = message.get("author"), message.get("content"), message.get("metadata")
    role = author.get("role") if isinstance(author, dict) else None
    if role not in (USER, ASSISTANT) or not isinstance(content, dict):
        return None
    if isinstance(metadata, dict) and (metadata.get("is_visually_hidden_from_conversation")
                                       or metadata.get("is_user_system_message")):
        return None
    if message.get("recipient", "all") != "all" or content.get("content_type") not in _CHATGPT_TEXT:
        return None
    parts = content.get("parts")
    texts = [_part_text(p) for p in parts] if isinstance(parts, list) else []
    text = "\n".join(t for t in texts if t)
    if not text:
        return None
    return Turn(role, text, _epoch(message.get("create_time"), "a message's create_time"))


def _part_text(part: object) -> str:
    """A part's text: a string, or an object with text (a voice message's transcription);
    images and files are no text."""
    if isinstance(part, dict):
        part = part.get("text")
    return part.strip() if isinstance(part, str) else ""


# -- Claude ---------------------------------------------------------------------------------


def _claude(item: dict, here: str) -> Conversation:
    ident, messages = item.get("uuid"), item.get("chat_messages")
    if not _text(ident):
        raise ValueError("no uuid: a Claude conversation has one")
    if not isinstance(messages, list):
        raise ValueError("chat_messages must be a list of messages")
    turns = []
    for number, message in enumerate(messages, 1):
        if not isinstance(message, dict):
            raise ValueError(f"chat_messages[{number}] must be an object")
        sender = message.get("sender")
        speaker = USER if sender == "human" else ASSISTANT if sender == "assistant" else None
        text = _claude_text(message)
        if speaker is not None and text:
            turns.append(Turn(speaker, text, _iso(message.get("created_at"), f"chat_messages[{number}].created_at")))
    return Conversation(here, ident, _title(item.get("name")), ASSISTANTS["claude"],
                        _iso(item.get("created_at"), "created_at"), _iso(item.get("updated_at"), "updated_at"),
                        turns)


def _claude_text(message: dict) -> str:
    content = message.get("content")
    blocks = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"] \
        if isinstance(content, list) else []
    texts = [b.strip() for b in blocks if isinstance(b, str) and b.strip()]
    if texts:
        return "\n".join(texts)
    text = message.get("text")
    return text.strip() if isinstance(text, str) else ""


# -- values ---------------------------------------------------------------------------------


def _title(value: object) -> str:
    return " ".join(value.split()) if isinstance(value, str) and value.strip() else ""


def _text(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value.strip())


def _epoch(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be epoch seconds (got {str(value)[:40]!r})")
    try:
        return datetime.fromtimestamp(value, timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"{name} {value!r:.40} is out of range") from None


def _iso(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be an ISO-8601 time (got {str(value)[:40]!r})")
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{name} must be an ISO-8601 time (got {value[:40]!r})") from None
    return when  # one without an offset is read on the user's clock, as every turn's time
