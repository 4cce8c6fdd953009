"""Chat exports shaped like the real ones, for the tests that import them: ChatGPT's
conversations.json (a message tree per conversation: the kept branch ends at current_node, an
edited question leaves the old one on a branch of its own; hidden system messages, tool calls
and their output among the messages) and Claude's (chat_messages in order, text and tool
blocks in each message's content)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

# Words that are in the export but not in the conversation kept: none may reach a memory.
ABANDONED_WORD = "Zanzibarian"   # the question the user edited away (ChatGPT)
TOOL_WORD = "Quetzalcoatl"       # a tool call, a tool's output, a tool_use block
SYSTEM_WORD = "Brobdingnag"      # a hidden system message / custom instructions
ASSISTANT_WORD = "Ouagadougou"   # said by the assistant only: no fact about the user

ENGLISH = [
    ("user", "I adopted a cat named Luna last week."),
    ("assistant", f"Congratulations on Luna! Cats love a quiet corner; {ASSISTANT_WORD} has cat cafes."),
    ("user", "I prefer green tea over coffee in the morning."),
    ("assistant", "Green tea pairs well with a slow morning."),
]
CHINESE = [
    ("user", "我最近开始学游泳了，每周去两次。"),
    ("assistant", f"太好了！游泳对身体很好。{ASSISTANT_WORD}也有游泳馆。"),
    ("user", "我女儿下个月上小学。"),
    ("assistant", "恭喜！上小学是件大事。"),
]


def start_time(index: int) -> datetime:
    """When conversation `index` of a generated export began (UTC)."""
    return datetime(2024, 5, 8, 10, 0, tzinfo=timezone.utc) + timedelta(days=index)


def chatgpt_conversation(index: int, title: str, turns: list[tuple[str, str]]) -> dict:
    """One ChatGPT conversation: a system root, a hidden system message, the turns one after
    another (the first question also edited, so its old version is a dead branch), an
    assistant's tool call and the tool's output before the last answer."""
    begun = start_time(index).timestamp()
    ident = f"6650f5a1-0000-4000-8000-{index:012d}"
    mapping: dict[str, dict] = {}

    def node(key: str, parent: str | None, message: dict | None) -> str:
        mapping[key] = {"id": key, "message": message, "parent": parent, "children": []}
        if parent is not None:
            mapping[parent]["children"].append(key)
        return key

    def message(key: str, role: str, text: str, moment: float, **extra) -> dict:
        content = extra.pop("content", {"content_type": "text", "parts": [text]})
        return {"id": key, "author": {"role": role, "name": None, "metadata": {}}, "create_time": moment,
                "update_time": None, "content": content, "status": "finished_successfully",
                "end_turn": role == "assistant", "weight": 1.0, "metadata": extra.pop("metadata", {}),
                "recipient": extra.pop("recipient", "all"), "channel": None}

    last = node("client-created-root", None, None)
    last = node("sys", last, message("sys", "system", f"{SYSTEM_WORD} instructions", begun,
                                     metadata={"is_visually_hidden_from_conversation": True}))
    node("edited-away", last, message("edited-away", "user", f"Tell me about {ABANDONED_WORD} cats.", begun))
    moment = begun
    for number, (role, text) in enumerate(turns):
        moment = begun + 60 * (number + 1)
        if number == len(turns) - 1 and role == "assistant":
            last = node(f"call-{number}", last, message(
                f"call-{number}", "assistant", "", moment - 30, recipient="python",
                content={"content_type": "code", "language": "python", "text": f"print('{TOOL_WORD}')"}))
            last = node(f"out-{number}", last, message(
                f"out-{number}", "tool", "", moment - 20,
                content={"content_type": "execution_output", "text": TOOL_WORD}))
        parts = [text] if role == "assistant" else [
            {"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-1"}, text]
        last = node(f"m-{number}", last, message(
            f"m-{number}", role, text, moment,
            content={"content_type": "multimodal_text" if role == "user" else "text", "parts": parts}))
    return {"title": title, "create_time": begun, "update_time": moment, "mapping": mapping,
            "moderation_results": [], "current_node": last, "plugin_ids": None,
            "conversation_id": ident, "conversation_template_id": None, "gizmo_id": None,
            "is_archived": False, "safe_urls": [], "default_model_slug": "gpt-4o", "id": ident}


def claude_conversation(index: int, title: str, turns: list[tuple[str, str]]) -> dict:
    """One Claude conversation: its messages in order, an assistant's tool use among the blocks."""
    begun = start_time(index)

    def iso(moment: datetime) -> str:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"

    messages = []
    for number, (role, text) in enumerate(turns):
        content = [{"type": "text", "text": text, "citations": []}]
        if role == "assistant":
            content = [{"type": "tool_use", "name": "web_search", "input": {"query": TOOL_WORD}},
                       {"type": "tool_result", "name": "web_search", "content": [{"type": "text", "text": TOOL_WORD}]},
                       *content]
        moment = begun + timedelta(minutes=number + 1)
        messages.append({"uuid": f"m-{index}-{number}", "text": text, "content": content,
                         "sender": "human" if role == "user" else "assistant", "created_at": iso(moment),
                         "updated_at": iso(moment), "attachments": [], "files": []})
    return {"uuid": f"28ab77e3-0000-4000-8000-{index:012d}", "name": title, "created_at": iso(begun),
            "updated_at": iso(begun + timedelta(minutes=len(turns))), "account": {"uuid": "acc-1"},
            "chat_messages": messages}


def write_export(path: Path, conversations: list[dict], indent: int | None = None) -> Path:
    """conversations.json as the services write it: one JSON array (ChatGPT's on one line)."""
    path.write_text(json.dumps(conversations, ensure_ascii=False, indent=indent), encoding="utf-8")
    return path


def many_conversations(kind: str, count: int) -> list[dict]:
    """`count` conversations, each its own: English and Chinese by turns."""
    make = chatgpt_conversation if kind == "chatgpt" else claude_conversation
    result = []
    for index in range(count):
        if index % 2:
            turns = [("user", f"我第{index}次去杭州出差，住了三天。"), ("assistant", "杭州很美。")]
        else:
            turns = [("user", f"I ran {index} kilometres along the river this morning."),
                     ("assistant", "That is a good run.")]
        result.append(make(index, f"Conversation {index}", turns))
    return result
