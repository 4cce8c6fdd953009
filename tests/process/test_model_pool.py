"""A chat model that never answers does not starve memorize and recall: 50 summarize_memory
calls (provider llm) hang on a real loopback endpoint that accepts connections and never
answers, through a real front over HTTP, while another client session memorizes and recalls.
The model hangs until the test hangs up on it (its timeout is an hour), so nothing depends on
how fast the machine is. Then every summarize call ends (the rules fallback, or refused at
once as busy), and every memory written meanwhile is there."""

from __future__ import annotations

import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import db_rows, free_port, http_server, mcp_session, wait_for, write_config

CALLS = 50
ANSWER_DEADLINE_S = 30  # only to stop waiting for an answer that does not come
CONVERSATION = [{"speaker": "Caroline", "text": "I adopted a grey cat named Luna last week."},
                {"speaker": "Melanie", "text": "Lovely! I am flying to Paris next Friday."}]


class SilentEndpoint:
    """A TCP listener on loopback that accepts every connection and never sends a byte."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.sock.settimeout(0.05)  # so the accepting thread sees release()
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.accepted: list[socket.socket] = []
        self._lock = threading.Lock()
        self._released = False
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self):
        while not self._released:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                if self._released:
                    conn.close()
                else:
                    self.accepted.append(conn)

    def release(self):
        """Stop listening and hang up on every call: the model is gone."""
        with self._lock:
            if self._released:
                return
            self._released = True
            held = list(self.accepted)
        self._thread.join()
        self.sock.close()
        for conn in held:
            conn.close()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.release()


@pytest.fixture
def hung_front(tmp_path):
    with SilentEndpoint() as endpoint:
        config = write_config(tmp_path, server={"exposed_tools": ["memorize", "recall", "summarize_memory"]},
                              summarizer={
            "provider": "llm", "base_url": endpoint.base_url, "model": "never-answers",
            "timeout_s": 3600, "max_retries": 0, "max_concurrent": 4})
        with http_server(config, free_port()) as url:
            yield config, url, endpoint


def test_memorize_and_recall_answer_while_the_model_hangs(hung_front):
    config, url, endpoint = hung_front
    outcomes: list[tuple[str, str]] = []

    def summarize(session, number):
        result = session.call("summarize_memory", {"conversation": CONVERSATION, "store": True,
                                                   "session_id": f"s{number}"})
        text = result.content[0].text
        outcomes.append(("error", text) if result.is_error else ("ok", text))

    with mcp_session(url) as summarizing, mcp_session(url) as other:
        with ThreadPoolExecutor(CALLS) as callers:
            pending = [callers.submit(summarize, summarizing, n) for n in range(CALLS)]
            wait_for(lambda: len(endpoint.accepted) >= 4, 30, 0.05, "the summarize calls to reach the model")
            hanging = sum(1 for f in pending if not f.done())
            assert hanging > 0

            # Meanwhile, on another session: writes and a read answer.
            def write_and_read():
                ids = [other.ok("memorize", {"content": f"Alice keeps bees on her roof, hive {n}"})["id"]
                       for n in range(5)]
                return ids, other.ok("recall", {"query": "who keeps bees", "k": 10})

            with ThreadPoolExecutor(1) as meanwhile:
                try:
                    written, found = meanwhile.submit(write_and_read).result(timeout=ANSWER_DEADLINE_S)
                except TimeoutError:
                    endpoint.release()  # let the front go, then fail
                    pytest.fail(f"memorize/recall got no answer within {ANSWER_DEADLINE_S} s "
                                "while the model hung")
            assert {r["id"] for r in found["results"]} & set(written)
            assert all(isinstance(r["score"], (int, float)) for r in found["results"])
            # The model was still holding calls all along.
            assert sum(1 for f in pending if not f.done()) > 0
            endpoint.release()

            for future in pending:
                future.result(timeout=120)  # deadline only to stop waiting

        # Every call ended: with the rules summary and a warning once the model hung up, or
        # refused at once as busy; none is an internal error.
        assert len(outcomes) == CALLS
        answered = [text for kind, text in outcomes if kind == "ok"]
        refused = [text for kind, text in outcomes if kind == "error"]
        assert answered, "no summarize call was answered"
        assert all("llm provider failed" in text for text in answered)
        assert all(text.startswith("busy:") and "retry" in text for text in refused), refused[:3]
        # Those answered were stored (the same conversation stays one memory); nothing
        # written meanwhile was lost.
        summarized = {json.loads(text)["id"] for text in answered}
        assert len(summarized) == 1
        stored = {row[0] for row in db_rows(config, "SELECT id FROM documents")}
        assert stored == summarized | set(written)
        after = other.ok("recall", {"query": "who keeps bees", "k": 10})
        assert set(written) <= {r["id"] for r in after["results"]}
