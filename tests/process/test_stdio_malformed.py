"""The stdio front answers every malformed line with a JSON-RPC error and keeps serving: an
id it cannot echo (a lone surrogate), invalid JSON, invalid UTF-8 and NULs, through a real
`aokun-server` process spoken to raw on stdin."""

from __future__ import annotations

import pytest

from raw_stdio import INITIALIZE, RawStdio

MALFORMED = [  # (raw line, expected id of the error reply)
    (rb'{"jsonrpc":"2.0","id":"\ud800","method":"ping"}', None),  # an id it cannot echo
    (rb'{"jsonrpc":"2.0","id":"\udfff\ud800","method":"tools/list"}', None),
    (rb'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"\ud800"}}', 7),
    (b'{"jsonrpc":"2.0","id":8,"method":"ping"', None),  # cut off
    (b"not json at all", None),
    (b'{"jsonrpc":"2.0","id":"caf\xe9","method":"ping"}', None),  # invalid UTF-8
    (b"\xff\xfe\x00\x00", None),
    (b"\x00" * 64, None),  # NULs
    (b'{"jsonrpc":"2.0","id":11,"method":"ping"}\x00', None),
    (b'{"jsonrpc":"2.0","id":12,"method":"ping","params":{"x":"a\\u0000b"}}', 12),
]


@pytest.mark.slow
def test_malformed_lines_get_an_error_and_the_server_keeps_serving(config_path):
    server = RawStdio(config_path)
    try:
        server.send(INITIALIZE)
        assert server.reply()["result"]["serverInfo"]["name"] == "aokun-memory"
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for raw, ident in MALFORMED:
            server.send(raw)
            reply = server.reply(timeout=30)
            assert reply["jsonrpc"] == "2.0" and "id" in reply and reply["id"] == ident, (raw, reply)
            if ident != 12:  # a NUL escaped in a string is valid JSON: ping answers it
                assert reply["error"]["code"] in (-32700, -32600, -32603), (raw, reply)
            assert server.proc.poll() is None, raw
        server.send({"jsonrpc": "2.0", "id": 20, "method": "ping"})
        assert server.reply() == {"jsonrpc": "2.0", "id": 20, "result": {}}
        server.send({"jsonrpc": "2.0", "id": 21, "method": "tools/list"})
        listed = server.reply()
        assert listed["id"] == 21 and "memorize" in [t["name"] for t in listed["result"]["tools"]]
        assert server.proc.poll() is None
    finally:
        assert server.close() == 0  # stdin closed: the server ends by itself, cleanly
