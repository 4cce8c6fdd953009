"""`aokun hook` asks a running HTTP front (a real aokun-server process, found by its heartbeat)
for the prompt's memories: the front's recall answers and records the access, and the hook
reaches the front at the port it listens on, not at a port saved since. The hook itself runs
as a host runs it, its main() in this process (tests/test_hook.py: the hook reading the store,
and a front that does not answer)."""

from __future__ import annotations

import re
from contextlib import contextmanager

from helpers import db_rows, free_port, http_server, seed_memories, wait_for, write_config
from hook_runs import hook, prompt_json

TEA = "I love green tea with jasmine every morning"
PEANUTS = "My daughter Mia is allergic to peanuts"


def seeded(config, *texts: str) -> list[int]:
    return seed_memories(config, "me", *texts)


@contextmanager
def beating_front(config, port: int):
    """An HTTP front on `port`, once its heartbeat is in the store (the hook looks for it)."""
    with http_server(config, port):
        wait_for(lambda: db_rows(config, "SELECT COUNT(*) FROM fronts WHERE transport = 'http'")
                 == [(1,)], 30, what="the front's heartbeat")
        yield


def test_a_running_front_answers_the_prompt(tmp_path):
    port = free_port()
    config = write_config(tmp_path, server={"port": port, "token": "s3cret"})
    peanuts, _ = seeded(config, PEANUTS, TEA)
    with beating_front(config, port):
        done = hook(config, "prompt", "--verbose", stdin=prompt_json("Is Mia allergic to peanuts?"))
        assert done.returncode == 0, done.stderr
        assert PEANUTS in done.stdout
        assert f"from the front at http://127.0.0.1:{port}/mcp" in done.stderr, done.stderr
        # The front's recall records the access; a hook reading the store itself does not.
        wait_for(lambda: db_rows(config, "SELECT access_count FROM documents WHERE id = ?",
                                 (peanuts,)) == [(1,)], 10, what="the access the front recorded")
        here = hook(config, "prompt", "--no-front", "--verbose", stdin=prompt_json("Is Mia allergic to peanuts?"))
        # The same memories; the scores differ, the front's recall having vectors as evidence too.
        assert _unscored(here.stdout) == _unscored(done.stdout)
        assert "from the store (" in here.stderr, here.stderr
        assert db_rows(config, "SELECT access_count FROM documents WHERE id = ?", (peanuts,)) == [(1,)]


def _unscored(output: str) -> str:
    return re.sub(r" · [0-9.]+\]", "]", output)


def test_the_hook_reaches_the_front_where_it_listens_not_a_port_saved_since(tmp_path):
    """server.port saved after the front started (the panel writes it at once; the front
    takes it at its restart): the hook asks the running front, at the port in its heartbeat."""
    port, saved_port = free_port(), free_port()
    config = write_config(tmp_path, server={"port": saved_port})
    seeded(config, PEANUTS)
    with beating_front(config, port):
        assert db_rows(config, "SELECT endpoint FROM fronts") == [(f"http://127.0.0.1:{port}/mcp",)]
        done = hook(config, "prompt", "--verbose", stdin=prompt_json("Is Mia allergic to peanuts?"))
    assert done.returncode == 0 and PEANUTS in done.stdout
    assert f"from the front at http://127.0.0.1:{port}/mcp" in done.stderr, done.stderr
