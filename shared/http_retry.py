"""POSTs to OpenAI-compatible APIs (embeddings, chat completions) with retries: 429, 5xx and
transport errors are retried with exponential backoff, honouring Retry-After within a bound."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

import httpx

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def post_with_retry(client: httpx.Client, path: str, payload: dict, *, what: str,
                    error: type[Exception], max_retries: int, backoff_s: float = 0.5,
                    max_wait_s: float = 60.0, retry_timeouts: bool = True) -> httpx.Response:
    """POST until the answer is not a retryable status and return that response (a 4xx too:
    the caller decides what it means). `error` is raised, naming `what`, when the endpoint
    cannot be reached or still fails after max_retries; a timeout is final unless
    retry_timeouts (a request that took the whole timeout is costly to repeat)."""
    for attempt in range(max_retries + 1):
        wait = None
        try:
            response = client.post(path, json=payload)
        except httpx.TimeoutException as exc:
            message = f"{what} timed out after {client.timeout.read:g} s"
            if not retry_timeouts:
                raise error(message) from exc
        except httpx.HTTPError as exc:
            message = f"cannot reach the {what}: {exc}"
        else:
            if response.status_code not in RETRY_STATUS:
                return response
            message = f"{what} answered HTTP {response.status_code}: {brief_body(response)}"
            wait = retry_after(response, max_wait_s)
        if attempt < max_retries:
            time.sleep(wait if wait is not None else min(backoff_s * 2 ** attempt, max_wait_s))
    raise error(f"{message} (after {max_retries} {'retry' if max_retries == 1 else 'retries'})"
                if max_retries else message)


def post_json(client: httpx.Client, path: str, payload: dict, *, what: str,
              error: type[Exception], **retry) -> dict:
    """post_with_retry, then the JSON of an HTTP 200 reply; anything else raises `error`."""
    return json_of(post_with_retry(client, path, payload, what=what, error=error, **retry), what, error)


def json_of(response: httpx.Response, what: str, error: type[Exception]) -> dict:
    if response.status_code != 200:
        raise error(f"{what} answered HTTP {response.status_code}: {brief_body(response)}")
    try:
        return response.json()
    except ValueError as exc:
        raise error(f"{what} sent invalid JSON: {exc}") from exc


def retry_after(response: httpx.Response, max_wait_s: float) -> float | None:
    """Seconds the server asks us to wait (delta-seconds or an HTTP date), within [0, max_wait_s]."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), max_wait_s)


def brief_body(response: httpx.Response) -> str:
    """The error's message from an OpenAI-style {"error": {"message"}} body, else the text, on one line."""
    text = response.text
    try:
        body = response.json()
        if isinstance(body, dict):
            found = body.get("error", body)
            found = found.get("message", found) if isinstance(found, dict) else found
            text = found if isinstance(found, str) else text
    except ValueError:
        pass
    return " ".join(text.split())[:200]
