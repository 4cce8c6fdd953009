"""A real HTTP server on loopback that speaks the OpenAI embeddings API, for tests.

Vectors are deterministic hashed bags of words, so texts sharing words are close. The server
can be told to fail the next N requests with HTTP 500 or to answer with the wrong dimension.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

# How often serve_forever looks for shutdown(): the time a test waits for this server to stop.
SHUTDOWN_POLL_S = 0.02


def hashed_embedding(text: str, dim: int) -> list[float]:
    vector = np.zeros(dim, dtype=np.float64)
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "little") % dim] += 1.0
    vector[0] += 0.01  # no all-zero vectors
    return (vector / np.linalg.norm(vector)).tolist()


class FakeEmbeddingsServer:
    def __init__(self, dim: int = 64):
        self.dim = dim
        self.fail_next = 0
        self.answer_dim: int | None = None
        self.delay_s = 0.0
        self.requests = 0
        self.texts: list[str] = []
        self.last_auth: str | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests += 1
                time.sleep(server.delay_s)
                server.last_auth = self.headers.get("Authorization")
                if not self.path.endswith("/embeddings"):
                    return self._reply(404, {"error": "not found"})
                if server.fail_next > 0:
                    server.fail_next -= 1
                    return self._reply(500, {"error": {"message": "upstream overloaded"}})
                dim = server.answer_dim or body.get("dimensions") or server.dim
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                server.texts.extend(texts)
                data = [{"object": "embedding", "index": i, "embedding": hashed_embedding(t, dim)}
                        for i, t in enumerate(texts)]
                self._reply(200, {"object": "list", "data": data, "model": body["model"]})

            def _reply(self, status, payload):
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()
