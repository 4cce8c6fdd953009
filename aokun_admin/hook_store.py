"""`aokun hook`'s side of the store: opening it as it is, through the light assembly
(shared/assembly.py: open_reader), the caller's persona scopes, where a live front of it
listens, and recall in the hook's own process when no front answers.

The store is opened read-only (no migrations, no writes, no access counts; a front's recall
records them). Recall here runs from BM25 and graph keywords without vectors (see recall_here
for why), once per persona the caller may read, merged as the recall tool merges them
(shared/search/persona_merge.py). A session-start profile (hook_profile.py) is a few SQL
reads per persona and needs neither segmenter nor embedder, so it always reads the store
directly.

Cold start: standard library only at import time, as for every hook module; the store,
search and segmenter are imported by the call that needs them.
"""

from __future__ import annotations

from aokun_admin.hook_front import HookError

# Lazy imports: a hook runs before every prompt the host sends and its time is the user's wait
# (scripts/bench_hook.py); only a path that reads the store pays for the store's imports.


def open_existing(config):
    """The parts over the store, opened for reading as it is: never created, never migrated
    (shared/assembly.py: open_reader). The caller closes them."""
    from shared.assembly import open_reader
    from shared.errors import StorageError
    from shared.store.face import location

    try:
        return open_reader(config)
    except StorageError as exc:
        if exc.kind != "cannot_open":
            raise
        raise HookError(f"no memory store at {location(config.storage)} (check storage in the config)") from None


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
            readable_personas(config, opened.store, persona)
        finally:
            opened.close()
    except AccessDenied:
        raise
    except Exception:  # no store here to word it: the front's refusal stands
        return


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


def recall_here(services, prompt: str, k: int, personas: tuple[str | None, ...],
                min_score: float | None, room: int) -> tuple[list, str]:
    """Recall in this process from BM25 and the graph's keyword channel, without vectors
    (shared/assembly.py: keyword_recaller): loading the embedder and both vector indexes
    would add about a second to every hook call (docs/performance.md), on top of jieba's
    dictionary that the keyword channels need anyway. Recall without vectors is what a front
    serves while its embedder is down; a running front serves every channel. A question's
    time words are read on the user's clock (memory.time_zone)."""
    from shared.search.persona_merge import recall_over_personas
    from shared.search.recall import RecallRequest, floors
    from shared.store.model.documents import DocumentFilter
    from shared.time_zone import user_zone

    config = services.live.now
    recaller = services.keyword_recaller
    request = RecallRequest(prompt, k, DocumentFilter(), max_chars=room, zone=user_zone(config.memory.time_zone),
                            **floors(config.retrieval, min_score))
    hits = recall_over_personas(recaller.recall, request, personas)
    return hits, f"the store ({'+'.join(recaller.config.channels)})"
