"""The llm provider: any OpenAI-compatible /chat/completions endpoint (DeepSeek, OpenAI,
SiliconFlow, Ollama, vLLM) asked for the memory as JSON, validated by StructuredMemory, with
one repair round when the reply does not validate."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass

import httpx
from pydantic import ValidationError

from shared.config import SummarizerConfig, secret
from shared.errors import SummarizerError
from shared.http_retry import client as deadline_client
from shared.http_retry import json_of, post_with_retry
from shared.summarize.conversation import Turn
from shared.summarize.schema import MODEL_FIELDS, StructuredMemory

WHAT = "chat endpoint"

# Endpoints (base_url, model) that refused response_format json_schema: asked for json_object
# for the rest of the process instead of being refused once per call.
_JSON_OBJECT_ONLY: set[tuple[str, str]] = set()
_JSON_OBJECT_LOCK = threading.Lock()

_FIELD_GUIDE = {
    "summary": "the conversation's key facts in order, as plain sentences, at most {summary_chars} characters.",
    "topics": "a few short topic names.",
    "participants": "the names of the speakers and of the people they talk about.",
    "key_facts": (
        "at most {max_key_facts} facts worth remembering about the people: what they did, plan, prefer, "
        "own, feel, and how they relate to others. Each one a stand-alone sentence with the speaker "
        "as subject, by name, never \"I\" or \"you\" (\"I adopted a cat\" said by Caroline becomes "
        "\"Caroline adopted a cat\"), and every relative date resolved to a calendar date from the "
        "time it was said (\"tomorrow\" said on 2023-05-08 becomes \"on 2023-05-09\"). Leave out small talk."),
    "sentiment": "\"positive\", \"neutral\" or \"negative\": the overall tone.",
    "importance": ("a number from 0 to 1: how much this is worth remembering (plans, preferences, "
                   "personal facts and emotional events high; small talk low)."),
    "persona_summary": "one or two sentences on what this conversation tells about its people, or null.",
}
_SYSTEM_PROMPT = "\n".join([
    "You turn a conversation into a memory for a long-term memory system. Answer with one JSON "
    "object and nothing else, with exactly these keys:",
    *(f'- "{name}": {_FIELD_GUIDE[name]}' for name in MODEL_FIELDS),
    "Answer in the language of the conversation: a Chinese conversation gets a Chinese summary, "
    "topics and facts."])
_REPAIR = ("Your reply was not a valid memory: {error}\n"
           "Answer again with only the corrected JSON object, with exactly the keys asked for.")
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S | re.I)
_STRICT_KEYS = ("type", "enum", "items", "anyOf", "description")



@dataclass
class Usage:
    """Tokens spent over every request of one summary, as the endpoint reported them."""
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, reply: dict) -> None:
        usage = reply.get("usage") if isinstance(reply, dict) else None
        if isinstance(usage, dict):
            self.prompt_tokens += _count(usage.get("prompt_tokens"))
            self.completion_tokens += _count(usage.get("completion_tokens"))


class LlmSummarizer:
    """One summary from one configuration; `usage` holds what it spent, even when it failed."""

    def __init__(self, config: SummarizerConfig, env: Mapping[str, str] | None = None):
        self._config = config
        self._api_key = secret(config.api_key, config.api_key_env, env)
        self.usage = Usage()

    def summarize(self, turns: list[Turn]) -> StructuredMemory:
        """The model's memory (provider "llm"); SummarizerError when there is none to use."""
        self._check_configured()
        messages = [{"role": "system", "content": _system_prompt(self._config)},
                    {"role": "user", "content": _conversation(turns)}]
        with self._client() as client:
            content = self._complete(client, messages)
            try:
                return parse_memory(content)
            except ValueError as exc:
                error = str(exc)
            messages += [{"role": "assistant", "content": content},
                         {"role": "user", "content": _REPAIR.format(error=error)}]
            content = self._complete(client, messages)
            try:
                return parse_memory(content)
            except ValueError as exc:
                raise SummarizerError(f"model reply still invalid after one repair: {_one_line(str(exc))}") from exc

    def _check_configured(self) -> None:
        for key in ("base_url", "model"):
            if not getattr(self._config, key).strip():
                raise SummarizerError(f"summarizer.{key} is empty; set it in the config file")
        try:
            url = httpx.URL(self._config.base_url)
            usable, reason = url.scheme in ("http", "https") and bool(url.host), "it needs http(s):// and a host"
        except httpx.InvalidURL as exc:
            usable, reason = False, str(exc)
        if not usable:
            raise SummarizerError(f"summarizer.base_url {self._config.base_url!r} is not usable: {reason}")

    def _client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        # Each request must be complete within timeout_s (connect + headers + body), not merely
        # see a byte every timeout_s: see shared.http_retry.
        return deadline_client(self._config.base_url.rstrip("/") + "/", headers, self._config.timeout_s)

    def _complete(self, client: httpx.Client, messages: list[dict]) -> str:
        """One chat completion's text, in json_schema mode unless the endpoint refused it."""
        endpoint = (self._config.base_url.rstrip("/"), self._config.model)
        with _JSON_OBJECT_LOCK:
            mode = "json_object" if endpoint in _JSON_OBJECT_ONLY else "json_schema"
        response = self._post(client, messages, mode)
        if mode == "json_schema" and _refuses_json_schema(response):
            with _JSON_OBJECT_LOCK:
                _JSON_OBJECT_ONLY.add(endpoint)
            response = self._post(client, messages, "json_object")
        reply = json_of(response, WHAT, SummarizerError)
        self.usage.add(reply)
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise SummarizerError(f"{WHAT} gave a reply without choices[0].message.content: "
                                  f"{json.dumps(reply)[:200]}") from exc
        return content if isinstance(content, str) else ""

    def _post(self, client: httpx.Client, messages: list[dict], mode: str) -> httpx.Response:
        payload = {"model": self._config.model, "messages": messages, "temperature": 0,
                   "response_format": _response_format(mode)}
        # Never wait longer for a retry than for an answer: summaries are asked for by a caller.
        return post_with_retry(client, "chat/completions", payload, what=WHAT, error=SummarizerError,
                               max_retries=self._config.max_retries,
                               max_wait_s=min(60.0, self._config.timeout_s), retry_timeouts=False,
                               timeout_s=self._config.timeout_s)


def parse_memory(content: str) -> StructuredMemory:
    """The model's JSON as a StructuredMemory (provider "llm"); ValueError saying what is wrong."""
    fenced = _FENCE.match(content)  # some models wrap JSON in a code fence even in JSON mode
    try:
        data = json.loads(fenced.group(1) if fenced else content)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc}): {content[:120]!r}") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object with keys {', '.join(MODEL_FIELDS)}, got {type(data).__name__}")
    data = {key: value for key, value in data.items() if key not in ("provider", "warnings")}
    try:
        return StructuredMemory(**data, provider="llm")
    except ValidationError as exc:
        raise ValueError("; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}"
                                   for e in exc.errors()[:8])) from None


def strict_schema() -> dict:
    """StructuredMemory's model fields as a strict JSON schema (only keywords strict mode takes)."""
    properties = StructuredMemory.model_json_schema()["properties"]
    return {"type": "object", "additionalProperties": False, "required": list(MODEL_FIELDS),
            "properties": {name: _strict(properties[name]) for name in MODEL_FIELDS}}


def _strict(schema: dict) -> dict:
    kept = {key: schema[key] for key in _STRICT_KEYS if key in schema}
    if "items" in kept:
        kept["items"] = _strict(kept["items"])
    if "anyOf" in kept:
        kept["anyOf"] = [_strict(option) for option in kept["anyOf"]]
    return kept


def _response_format(mode: str) -> dict:
    if mode == "json_object":
        return {"type": "json_object"}
    return {"type": "json_schema",
            "json_schema": {"name": "structured_memory", "strict": True, "schema": strict_schema()}}


def _refuses_json_schema(response: httpx.Response) -> bool:
    """A 400/422 that names response_format or json_schema (DeepSeek, older vLLM and Ollama)."""
    text = response.text.lower()
    return response.status_code in (400, 422) and ("response_format" in text or "json_schema" in text)


def _system_prompt(config: SummarizerConfig) -> str:
    return _SYSTEM_PROMPT.format(summary_chars=config.summary_chars, max_key_facts=config.max_key_facts)


def _conversation(turns: list[Turn]) -> str:
    """The transcript, each line dated when its time differs from the line before."""
    lines, last = [], None
    for turn in turns:
        stamp = ""
        if turn.time is not None and turn.time != last:
            stamp = f"[{turn.time:%Y-%m-%d %a %H:%M}] "
            last = turn.time
        lines.append(f"{stamp}{turn.speaker}: {turn.text}")
    if last is None:
        return "No date is known: keep relative dates as they were said.\n\nConversation:\n" + "\n".join(lines)
    return "Conversation (a line's date is when it was said):\n" + "\n".join(lines)


def _count(value) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]
