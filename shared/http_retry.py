"""POSTs to OpenAI-compatible APIs (embeddings, chat completions) with retries: 429, 5xx and
transport errors are retried with exponential backoff, honouring Retry-After within a bound.

Deadlines. httpx's timeout bounds each socket operation, so a server that trickles a byte every
few seconds (headers or body) would hold a request forever. A client from `client()` has a
network backend that clips every connect, TLS handshake, read and write to the deadline of the
request under way (a context variable set by post_with_retry), so one attempt ends, with
httpx.TimeoutException, `timeout_s` after it started: connect + headers + body. No threads,
no polling: each socket call just gets the smaller of its own timeout and the time left.
The retries stop at an overall deadline too: (max_retries + 1) * timeout_s for the attempts plus
max_retries * max_wait_s for the pauses between them, from the first attempt; an attempt is cut
at it and a pause that would end past it is not taken."""

from __future__ import annotations

import contextvars
import ssl
import time
import typing
from email.utils import parsedate_to_datetime

import httpcore
import httpx

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


# time.monotonic() by which the request under way must be complete; None outside post_with_retry.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("aokun_http_deadline", default=None)


def client(base_url: str, headers: dict, timeout_s: float) -> httpx.Client:
    """An httpx client whose requests made through post_with_retry end at their deadline."""
    made = httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s)
    for transport in [made._transport, *made._mounts.values()]:  # the mounts: proxies from the environment
        _wrap_backend(transport)
    return made


def _clip(timeout: float | None) -> float | None:
    """The smaller of a socket operation's own timeout and the time left to the deadline;
    httpcore.ReadTimeout when none is left (httpx turns it into httpx.ReadTimeout)."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _clip(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _clip(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, _clip(timeout)))

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, backend: httpcore.NetworkBackend):
        self._backend = backend

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options=None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_tcp(host, port, _clip(timeout), local_address,
                                                         socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options=None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_unix_socket(path, _clip(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _wrap_backend(transport: httpx.BaseTransport | None) -> None:
    """Wrap the network backend of an httpx transport's connection pool (also a proxy's)."""
    pool = getattr(transport, "_pool", None)
    if pool is None:
        return
    backend = getattr(pool, "_network_backend", None)
    if backend is None:  # not the httpcore pool this was written for: fail loudly, not silently
        raise RuntimeError("httpcore's connection pool has no _network_backend; deadlines cannot be set")
    if not isinstance(backend, _DeadlineBackend):
        pool._network_backend = _DeadlineBackend(backend)


def post_with_retry(client: httpx.Client, path: str, payload: dict, *, what: str,
                    error: type[Exception], max_retries: int, backoff_s: float = 0.5,
                    max_wait_s: float = 60.0, retry_timeouts: bool = True,
                    timeout_s: float | None = None) -> httpx.Response:
    """POST until the answer is not a retryable status and return that response (a 4xx too:
    the caller decides what it means). `error` is raised, naming `what`, when the endpoint
    cannot be reached or still fails after max_retries or at the overall deadline; a timeout is
    final unless retry_timeouts (a request that took the whole timeout is costly to repeat).
    Each attempt must be complete within timeout_s (the client's read timeout by default) when
    the client comes from `client()`; see the module's note on deadlines."""
    timeout_s = client.timeout.read if timeout_s is None else timeout_s
    overall = None
    if timeout_s is not None:
        overall = time.monotonic() + (max_retries + 1) * timeout_s + max_retries * max_wait_s
    message = f"{what} was not tried (max_retries {max_retries})"  # every attempt below sets its own
    for attempt in range(max_retries + 1):
        wait = None
        token = None
        if overall is not None and timeout_s is not None:  # overall is set only with a timeout
            token = _DEADLINE.set(min(time.monotonic() + timeout_s, overall))
        try:
            response = client.post(path, json=payload)
        except httpx.TimeoutException as exc:
            message = f"{what} timed out after {timeout_s:g} s"
            if not retry_timeouts:
                raise error(message) from exc
        except httpx.HTTPError as exc:
            message = f"cannot reach the {what}: {exc}"
        else:
            if response.status_code not in RETRY_STATUS:
                return response
            message = f"{what} answered HTTP {response.status_code}: {brief_body(response)}"
            wait = retry_after(response, max_wait_s)
        finally:
            if token is not None:
                _DEADLINE.reset(token)
        if attempt < max_retries:
            pause = wait if wait is not None else min(backoff_s * 2 ** attempt, max_wait_s)
            if overall is not None and time.monotonic() + pause >= overall:
                raise error(f"{message} (gave up after {attempt + 1} "
                            f"{'attempt' if attempt == 0 else 'attempts'}: the overall deadline passed)")
            time.sleep(pause)
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
