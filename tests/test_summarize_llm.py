"""The llm provider and the summarizer's dispatch, against a real local chat server
(tests/fake_chat.py) and the real rules provider for the fallbacks."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest

from fake_chat import COMPLETION_TOKENS, PROMPT_TOKENS, FakeChatServer, error_reply, memory_reply, text_reply
from helpers import free_port, store_sql
from shared import http_retry
from shared.config import AppConfig, StorageConfig, SummarizerConfig, TextConfig
from shared.errors import InvalidInput
from shared.extract.atomize import AtomRules
from shared.live_config import LiveConfig
from shared.store import open_store
from shared.summarize.conversation import parse_conversation
from shared.summarize.llm import LlmSummarizer, SummarizerError
from shared.summarize.rules import RulesSummarizer
from shared.summarize.schema import MODEL_FIELDS
from shared.summarize.summarizer import Summarizer
from shared.text.segment import Segmenter

KEY_ENV = "AOKUN_TEST_SUMMARIZER_KEY"
MODEL = "fake-model"
TURNS = parse_conversation("Caroline: I adopted a grey cat yesterday, her name is Luna.\n"
                           "Melanie: That's lovely! I'm flying to Paris next Friday for my sister's wedding.",
                           datetime(2023, 5, 8, 13, 56))
MEMORY = {
    "summary": "Caroline adopted a grey cat named Luna on 2023-05-07. Melanie flies to Paris on 2023-05-12.",
    "topics": ["cat", "Paris trip"],
    "participants": ["Caroline", "Melanie"],
    "key_facts": ["Caroline adopted a grey cat named Luna on 2023-05-07.",
                  "Melanie is flying to Paris on 2023-05-12 for her sister's wedding."],
    "sentiment": "positive",
    "importance": 0.8,
    "persona_summary": "Caroline is a new cat owner; Melanie has a sister who is getting married.",
}


@pytest.fixture(scope="module")
def rules():
    return RulesSummarizer(AtomRules.load(), Segmenter(TextConfig()))


class PauseSpy:
    """shared.http_retry's `time`, noting each pause it takes between attempts (and taking it)."""

    def __init__(self):
        self.pauses: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        time.sleep(seconds)

    def __getattr__(self, name):
        return getattr(time, name)


@pytest.fixture
def pauses(monkeypatch) -> list[float]:
    """The pauses the retry loop takes, in order (the real time module elsewhere)."""
    spy = PauseSpy()
    monkeypatch.setattr(http_retry, "time", spy)
    return spy.pauses


@pytest.fixture
def store(tmp_path):
    store = open_store(StorageConfig(data_dir=tmp_path / "data"))
    yield store
    store.close()


def llm_config(base_url: str, **settings) -> SummarizerConfig:
    return SummarizerConfig(**{"provider": "llm", "base_url": base_url, "model": MODEL,
                               "api_key_env": KEY_ENV, **settings})


def summarizer(store, rules, base_url: str, **settings) -> Summarizer:
    return Summarizer(store, rules, live_with(llm_config(base_url, **settings)))


def live_with(summarizer_config: SummarizerConfig) -> LiveConfig:
    return LiveConfig(AppConfig(summarizer=summarizer_config))


def usage_rows(store) -> list[tuple]:
    return [tuple(row) for row in store_sql(
        store, "SELECT model, calls, prompt_tokens, completion_tokens, failures FROM llm_usage ORDER BY model")]


def assert_rules_fallback(result, rules, config: SummarizerConfig, reason: str):
    expected = rules.summarize(TURNS, config).trimmed()
    assert result.provider == "rules"
    assert result.model_dump(exclude={"warnings"}) == expected.model_dump(exclude={"warnings"})
    assert result.warnings[0].startswith("llm provider failed (") and reason in result.warnings[0]
    assert result.warnings[0].endswith("): rules summary used")


def test_valid_json_is_used_as_the_model_gave_it(store, rules, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-from-env")
    with FakeChatServer(memory_reply(MEMORY)) as api:
        result = summarizer(store, rules, api.base_url).summarize(TURNS)
    assert result.model_dump() == {**MEMORY, "provider": "llm", "warnings": []}
    [request] = api.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == "Bearer sk-from-env"
    body = request.body
    assert body["model"] == MODEL and body["temperature"] == 0
    system, user = body["messages"]
    assert system["role"] == "system" and "answer in the language of the conversation" in system["content"].lower()
    assert all(f'"{name}"' in system["content"] for name in MODEL_FIELDS)
    assert "speaker as subject" in system["content"] and "1200 characters" in system["content"]
    assert user["role"] == "user" and "[2023-05-08 Mon 13:56] Caroline: I adopted a grey cat" in user["content"]
    assert "\nMelanie: That's lovely!" in user["content"]  # same time: dated once
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema" and response_format["json_schema"]["strict"] is True
    schema = response_format["json_schema"]["schema"]
    assert schema["required"] == list(MODEL_FIELDS) == list(schema["properties"])
    assert schema["additionalProperties"] is False
    assert schema["properties"]["sentiment"]["enum"] == ["positive", "neutral", "negative"]
    assert "maxLength" not in json.dumps(schema) and "default" not in json.dumps(schema)  # strict mode refuses them
    assert usage_rows(store) == [(MODEL, 1, PROMPT_TOKENS, COMPLETION_TOKENS, 0)]


def test_api_key_from_config_first_and_no_header_without_one(store, rules, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-from-env")
    with FakeChatServer(always=memory_reply(MEMORY)) as api:
        summarizer(store, rules, api.base_url, api_key="sk-in-config").summarize(TURNS)
        monkeypatch.delenv(KEY_ENV)
        summarizer(store, rules, api.base_url).summarize(TURNS)
    assert api.requests[0].headers["Authorization"] == "Bearer sk-in-config"
    assert "Authorization" not in api.requests[1].headers


def test_an_endpoint_refusing_json_schema_gets_json_object_from_then_on(store, rules):
    with FakeChatServer(always=memory_reply(MEMORY), json_schema=False) as api:
        first = summarizer(store, rules, api.base_url).summarize(TURNS)
        second = summarizer(store, rules, api.base_url).summarize(TURNS)
    assert first.provider == second.provider == "llm" and first.warnings == second.warnings == []
    formats = [r.body["response_format"]["type"] for r in api.requests]
    assert formats == ["json_schema", "json_object", "json_object"]  # refused once, remembered
    assert "json" in api.requests[1].body["messages"][0]["content"].lower()  # json_object needs the word
    assert usage_rows(store) == [(MODEL, 2, 2 * PROMPT_TOKENS, 2 * COMPLETION_TOKENS, 0)]


@pytest.mark.parametrize("bad, named", [
    (text_reply('Sure! Here is the memory: {summary: "Caroline adopted a cat"}'), "not JSON"),
    (memory_reply({**MEMORY, "importance": 7}), "importance: Input should be less than or equal to 1"),
    (memory_reply({**MEMORY, "mood": "happy"}), "mood: Extra inputs are not permitted"),
    (text_reply('["Caroline adopted a cat"]'), "expected a JSON object"),
])
def test_an_invalid_reply_is_repaired_by_a_second_call(store, rules, bad, named):
    with FakeChatServer(bad, memory_reply(MEMORY)) as api:
        result = summarizer(store, rules, api.base_url).summarize(TURNS)
    assert result.model_dump() == {**MEMORY, "provider": "llm", "warnings": []}
    first, repair = api.requests
    messages = repair.body["messages"]
    assert messages[:2] == first.body["messages"]
    assert messages[2] == {"role": "assistant", "content": bad.body["choices"][0]["message"]["content"]}
    assert messages[3]["role"] == "user" and named in messages[3]["content"]
    assert usage_rows(store) == [(MODEL, 1, 2 * PROMPT_TOKENS, 2 * COMPLETION_TOKENS, 0)]


def test_json_in_a_code_fence_is_accepted_and_the_result_trimmed(store, rules):
    long_fact = "Caroline " + "really " * 200 + "likes cats."
    fenced = "```json\n" + json.dumps({**MEMORY, "topics": ["cat", "cat ", " "], "key_facts": [long_fact]}) + "\n```"
    with FakeChatServer(text_reply(fenced)) as api:
        result = summarizer(store, rules, api.base_url).summarize(TURNS)
    assert len(api.requests) == 1 and result.provider == "llm"
    assert result.topics == ["cat"] and result.key_facts == [long_fact[:1000]]


def test_invalid_twice_raises_in_the_provider_and_falls_back_to_rules(store, rules):
    config = llm_config("")
    with FakeChatServer(always=text_reply("I cannot summarize this conversation.")) as api:
        provider = LlmSummarizer(llm_config(api.base_url))
        with pytest.raises(SummarizerError, match="still invalid after one repair: not JSON"):
            provider.summarize(TURNS)
        assert (provider.usage.prompt_tokens, provider.usage.completion_tokens) \
            == (2 * PROMPT_TOKENS, 2 * COMPLETION_TOKENS)
        result = summarizer(store, rules, api.base_url).summarize(TURNS)
    assert len(api.requests) == 4  # two per summary: the ask and the one repair
    assert_rules_fallback(result, rules, config, "model reply still invalid after one repair: not JSON")
    assert usage_rows(store) == [(MODEL, 1, 2 * PROMPT_TOKENS, 2 * COMPLETION_TOKENS, 1)]


def test_429_is_retried_after_the_retry_after_it_names_within_a_bound(store, rules, pauses):
    with FakeChatServer(error_reply(429, "rate limited", retry_after="1"), memory_reply(MEMORY)) as api:
        result = summarizer(store, rules, api.base_url).summarize(TURNS)
    assert result.provider == "llm" and result.warnings == []
    assert pauses == [1.0]  # Retry-After, not the 0.5 s backoff
    assert api.requests[1].time - api.requests[0].time >= 0.95  # and the server saw it kept
    # An hour asked for: never waited longer than for an answer (timeout_s).
    with FakeChatServer(error_reply(429, "rate limited", retry_after="3600"), memory_reply(MEMORY)) as api:
        result = summarizer(store, rules, api.base_url, timeout_s=1.0).summarize(TURNS)
    assert result.provider == "llm"
    assert pauses == [1.0, 1.0]
    assert api.requests[1].time - api.requests[0].time >= 0.95
    assert usage_rows(store) == [(MODEL, 2, 2 * PROMPT_TOKENS, 2 * COMPLETION_TOKENS, 0)]


def test_server_errors_are_retried_then_fall_back_when_retries_run_out(store, rules):
    with FakeChatServer(error_reply(502, "bad gateway"), memory_reply(MEMORY)) as api:
        assert summarizer(store, rules, api.base_url, max_retries=1).summarize(TURNS).provider == "llm"
    assert len(api.requests) == 2
    with FakeChatServer(always=error_reply(500, "upstream overloaded")) as api:
        result = summarizer(store, rules, api.base_url, max_retries=2).summarize(TURNS)
    assert len(api.requests) == 3
    assert_rules_fallback(result, rules, llm_config(api.base_url),
                          "chat endpoint answered HTTP 500: upstream overloaded (after 2 retries)")
    assert usage_rows(store) == [(MODEL, 2, PROMPT_TOKENS, COMPLETION_TOKENS, 1)]


def test_a_timeout_gives_a_clear_fallback_without_retrying(store, rules, pauses):
    with FakeChatServer(always=memory_reply(MEMORY, delay_s=30)) as api:
        result = summarizer(store, rules, api.base_url, timeout_s=0.5).summarize(TURNS)
    assert len(api.requests) == 1 and pauses == []  # the request that took the whole timeout is not repeated
    assert result.warnings[0] == "llm provider failed (chat endpoint timed out after 0.5 s): rules summary used"
    assert_rules_fallback(result, rules, llm_config(api.base_url), "timed out after 0.5 s")
    assert usage_rows(store) == [(MODEL, 1, 0, 0, 1)]


def test_refused_connections_client_errors_and_missing_settings_fall_back(store, rules):
    closed = f"http://127.0.0.1:{free_port()}/v1"
    result = summarizer(store, rules, closed, max_retries=1).summarize(TURNS)
    assert_rules_fallback(result, rules, llm_config(closed), "cannot reach the chat endpoint")
    assert "(after 1 retry)" in result.warnings[0]
    with FakeChatServer(always=error_reply(401, "Invalid API key")) as api:
        result = summarizer(store, rules, api.base_url).summarize(TURNS)
    assert len(api.requests) == 1  # a client error is not retried
    assert_rules_fallback(result, rules, llm_config(api.base_url), "chat endpoint answered HTTP 401: Invalid API key")
    for base_url, named in [("", "summarizer.base_url is empty"), ("localhost:8000/v1", "is not usable")]:
        assert_rules_fallback(summarizer(store, rules, base_url).summarize(TURNS), rules, llm_config(base_url), named)
    result = Summarizer(store, rules, live_with(llm_config("http://127.0.0.1:9/v1", model=""))).summarize(TURNS)
    assert_rules_fallback(result, rules, llm_config(""), "summarizer.model is empty")
    assert usage_rows(store) == [(MODEL, 4, 0, 0, 4)]  # no model named, nothing to count against


def test_the_dispatcher_follows_the_live_config_and_the_provider_asked_for(store, rules):
    with FakeChatServer(always=memory_reply(MEMORY)) as api:
        live = live_with(llm_config(api.base_url, provider="rules"))
        dispatcher = Summarizer(store, rules, live)
        by_rules = dispatcher.summarize(TURNS)
        assert by_rules.model_dump() == rules.summarize(TURNS, live.now.summarizer).trimmed().model_dump()
        assert api.requests == [] and usage_rows(store) == []
        assert dispatcher.summarize(TURNS, provider="llm").provider == "llm"
        live.replace(AppConfig(summarizer=llm_config(api.base_url)))
        assert dispatcher.summarize(TURNS).provider == "llm"
        assert dispatcher.summarize(TURNS, provider="rules").provider == "rules"
        with pytest.raises(InvalidInput, match="provider must be one of rules, llm"):
            dispatcher.summarize(TURNS, provider="gpt")
    assert len(api.requests) == 2
