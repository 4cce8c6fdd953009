"""`aokun hook`'s side of the store: opening it as it is, the caller's persona scopes, where a
live front of it listens, and recall in the hook's own process when no front answers.

The store is opened read-only (no migrations, no writes, no access counts; a front's recall
records them). Recall here runs from BM25 and graph keywords without vectors (see recall_here
for the measurement), once per persona the caller may read, merged by score as the recall
tool merges them. A session-start profile (hook_profile.py) is a few SQL reads per persona
and needs neither segmenter nor embedder, so it always reads the store directly.

Cold start: standard library only at import time, as for every hook module; the store,
search and segmenter are imported by the call that needs them.
"""

from __future__ import annotations

from aokun_admin.hook_front import HookError

# Lazy imports: a hook runs before every prompt the host sends and its time is the user's wait
# (scripts/bench_hook.py); only a path that reads the store pays for the store's imports.


def open_existing(config):
    """The store, opened for reading as it is: never created, never migrated."""
    from shared.errors import StorageError
    from shared.store import open_store

    try:
        return open_store(config.storage, migrate=False)
    except StorageError as exc:
        if exc.kind != "cannot_open":
            raise
        raise HookError(f"no memory store at {where(config)} (check storage in the config)") from None


def readable_personas(config, store, persona: str | None) -> tuple[str | None, ...]:
    """The persona scopes the caller may read here (shared/access.read_personas: the one named,
    if held; else each of a user's personas; (None,) for the admin: every persona), or
    AccessDenied, printed as the hook's one line."""
    from aokun_admin.caller import caller
    from shared.access import read_personas

    return read_personas(caller(store, config), persona)


def own_check(config, persona: str | None, store) -> None:
    """The caller's scope checked against the store (AccessDenied when it refuses); nothing
    when the store cannot be read: the front's refusal is then the word."""
    from shared.errors import AccessDenied

    try:
        if store is not None:
            readable_personas(config, store, persona)
            return
        opened = open_existing(config)
        try:
            readable_personas(config, opened, persona)
        finally:
            opened.close()
    except AccessDenied:
        raise
    except Exception:  # no store here to word it: the front's refusal stands
        return


def where(config) -> str:
    """Where the config's store is, for messages (never a password)."""
    if config.storage.backend == "postgresql":
        from shared.store.postgres.connection import where as postgres_where

        return f"postgresql {postgres_where(config.storage.url)}"
    return str(config.storage.db_path)


def front_url(config, store) -> str | None:
    """The endpoint of a live HTTP front of this store on this machine, or None. Fronts beat
    in the store with the endpoint they listen on: the config's server.host/port when one
    listens there, else the newest front's (started with --port, or before a restart-only
    port was saved)."""
    from aokun_admin.mcp_config import running_endpoints
    from shared.serving import http_url

    running = running_endpoints(config, store)
    saved = http_url(config.server.host, config.server.port)
    return saved if saved in running else (running[0] if running else None)


def recall_here(config, store, prompt: str, k: int, personas: tuple[str | None, ...],
                min_score: float | None, room: int) -> tuple[list, str]:
    """Recall in this process from BM25 and the graph's keyword channel, without vectors:
    measured with scripts/bench_hook.py on 300 memories, loading the embedder and both vector
    indexes put the hook's median from 2.6 s to 3.6 s (a busy 2-core machine), on top of
    jieba's dictionary (~1 s) that the keyword channels need anyway. Recall without vectors
    is what a front serves while its embedder is down; a running front serves every channel.
    A question's time words are read on the user's clock (memory.time_zone)."""
    from dataclasses import replace

    from shared.search import answer
    from shared.search.channels import ChannelParts, build_channels
    from shared.search.recall import Recaller, RecallRequest, floors
    from shared.store.model.documents import DocumentFilter
    from shared.text.segment import Segmenter
    from shared.time_zone import user_zone

    channels = tuple(c for c in config.retrieval.channels if c in ("bm25", "graph_keyword"))
    if not channels:
        raise HookError("retrieval.channels has neither bm25 nor graph_keyword, which recall "
                        "without a running front needs")
    retrieval = replace(config.retrieval, channels=channels, cache_enabled=False)
    # No vector index: the channels kept above use none.
    parts = ChannelParts(store, retrieval, None, None, config.graph)  # pyright: ignore[reportArgumentType]
    recaller = Recaller(store, Segmenter(config.text), build_channels(parts), None, retrieval)
    floor = floors(config.retrieval, min_score)
    try:
        zone = user_zone(config.memory.time_zone)
        runs = [recaller.recall(RecallRequest(prompt, k, DocumentFilter(persona_id=persona),
                                              max_chars=room, zone=zone, **floor)) for persona in personas]
    finally:
        recaller.executor.shutdown(wait=False)
    # Scores are probabilities of relevance, comparable across personas: the best k of all.
    hits = runs[0] if len(runs) == 1 else answer.fit(
        sorted((hit for run in runs for hit in run), key=lambda hit: -hit.score)[:k], room)
    return hits, f"the store ({'+'.join(channels)})"
