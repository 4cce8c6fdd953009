"""The MCP tools: argument checks, one store call each, errors translated to ToolError.

Tools are plain `def`s: the SDK runs them in worker threads, and each thread has its own
SQLite connection, so a slow write never blocks the event loop. Every write goes through the
memory service (shared/memories.py), like every other entry point.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from aokun_server.ingest import dated, memory_fields
from aokun_server.models import (
    MAX_CONVERSATION_CHARS, MAX_CONVERSATION_TURNS, MAX_LIST_LIMIT, AtomOut, AtomsResult, AtomType,
    Conversation, DeleteResult, DocumentCounts, EditResult, Flag, K, ListLimit, ListResult,
    MaintenanceAction, MaintenanceResult, MemorizeResult, MemoryId, MemoryMetadata, MemoryOut, Offset,
    PinResult, Provider, RecallHit, RecallResult, ScopeId, StatsResult, SummarizeResult, parse_iso,
    reject_lone_surrogates,
)
from aokun_server.pipeline import Reinforcer, pipeline_figures, summarizer_figures
from shared.lifecycle import Lifecycle
from shared.live_config import LiveConfig
from shared.search.atoms import AtomSearch
from shared.search.recall import Hit, LiveRecaller, RecallRequest
from shared.search.vectors import VectorIndex
from shared.errors import AokunError
from shared.memories import MemoryService
from shared.store import consistency
from shared.store.documents import DocumentFilter, epoch
from shared.summarize.conversation import Turn, parse_conversation

if TYPE_CHECKING:
    from shared.summarize.summarizer import Summarizer

F = TypeVar("F", bound=Callable)

MAX_QUERY_CHARS = 100_000

@dataclass(frozen=True)
class ToolDeps:
    """What the tools need, built once at start-up. Settings are read from `live` at each
    call, so a changed config file applies from the next call on."""

    memories: MemoryService
    recaller: LiveRecaller
    index: VectorIndex
    reinforcer: Reinforcer
    atom_search: AtomSearch
    lifecycle: Lifecycle
    reconcile_queue: Callable[[], dict]
    live: LiveConfig
    summarizer: Summarizer


def translate_errors(fn: F) -> F:
    """Turn our own errors into ToolError so the caller reads the message, not a crash."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AokunError as exc:
            raise ToolError(str(exc)) from exc
        except ValidationError:
            raise  # a result that does not fit its model is our bug, not the caller's input
        except ValueError as exc:
            raise ToolError(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def checked_content(content: str, limit: int) -> str:
    reject_lone_surrogates("content", content)
    if not content.strip():
        raise ToolError("content is empty: give the text to remember")
    if len(content) > limit:
        raise ToolError(f"content is {len(content)} characters; the limit is {limit} "
                        "(server.max_content_chars)")
    return content


def checked_id(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    reject_lone_surrogates(name, value)
    if not value.strip():
        raise ToolError(f"{name} is empty; leave it out to search every {name.split('_')[0]}")
    return value


def register_tools(server: MCPServer, deps: ToolDeps) -> None:
    """Add every Aokun tool to server."""
    memories, store, live = deps.memories, deps.memories.documents, deps.live

    @server.tool()
    @translate_errors
    def memorize(content: str, metadata: MemoryMetadata = MemoryMetadata()) -> MemorizeResult:
        """Remember a piece of text (a fact, an event, a preference) for later recall.

        metadata (all optional): topics, participants, key_facts (lists of strings);
        sentiment (positive | neutral | negative); importance (0.0-1.0, default 0.5);
        pinned (never decays); session_id; persona_id (whose memory this is);
        original_time (ISO-8601, when it happened); persona_summary.
        The memory is committed before this returns."""
        content = checked_content(content, live.current.server.max_content_chars)
        doc = memories.memorize(content, metadata.to_fields())
        return MemorizeResult(id=doc.id, text=doc.text, persona_id=doc.fields.persona_id,
                              session_id=doc.fields.session_id)

    @server.tool()
    @translate_errors
    def summarize_memory(conversation: Conversation, persona_id: ScopeId | None = None,
                         session_id: ScopeId | None = None, store: Flag = False,
                         provider: Provider | None = None) -> SummarizeResult:
        """Turn a conversation into a structured memory: a summary, topics, participants, key
        facts (stand-alone sentences with the speaker as subject and dates resolved),
        sentiment and importance. Call it when a conversation ends, or before older turns
        leave your context, instead of writing the memory yourself; store=true also memorizes
        it (the same conversation stored twice stays one memory) and returns the receipt.
        conversation: a list of turns {speaker, text, time?} or one "Name: text" transcript.
        provider: rules (offline) or llm (the configured model); default from the config."""
        turns = dated(conversation_turns(conversation), datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0))
        memory = deps.summarizer.summarize(turns, provider)
        if not store:
            return SummarizeResult(**memory.model_dump(), persona_id=persona_id, session_id=session_id)
        content = checked_content(memory.summary, live.current.server.max_content_chars)
        doc, created = memories.memorize_once(content, memory_fields(memory, turns, persona_id, session_id))
        return SummarizeResult(**memory.model_dump(), id=doc.id, text=doc.text,
                               status="accepted" if created else "already stored", stored=created,
                               persona_id=doc.fields.persona_id, session_id=doc.fields.session_id)

    @server.tool()
    @translate_errors
    def recall(query: str, k: K | None = None, session_id: str | None = None,
               persona_id: str | None = None, include_archived: Flag = False,
               since: str | None = None, until: str | None = None,
               explain: Flag = False) -> RecallResult:
        """Find the memories most relevant to query, best first (k results, at most 15).

        Filter by session_id or persona_id to stay within one conversation or one user;
        since / until (ISO-8601) bound when the memory happened (original_time).
        explain=true adds, per result, the channels that found it and the score parts."""
        reject_lone_surrogates("query", query)
        if not query.strip():
            raise ToolError("query is empty: say what to look for")
        if k is not None and k < 1:
            raise ToolError(f"k must be at least 1, got {k}")
        start, end = time_bound(since, "since"), time_bound(until, "until")
        if start is not None and end is not None and start > end:
            raise ToolError(f"since ({since}) is after until ({until})")
        scope = DocumentFilter(session_id=checked_id(session_id, "session_id"),
                               persona_id=checked_id(persona_id, "persona_id"),
                               include_archived=include_archived, since=start, until=end)
        memory = live.current.memory
        k = min(k or memory.recall_top_k, memory.recall_max_k)
        hits = deps.recaller.recall(RecallRequest(query[:MAX_QUERY_CHARS], k, scope, explain))
        deps.reinforcer.touch([h.document.id for h in hits])
        return RecallResult(results=[_hit(h) for h in hits])

    @server.tool()
    @translate_errors
    def search_atoms(query: str, k: K = 5, types: list[AtomType] | None = None,
                     persona_id: str | None = None, session_id: str | None = None) -> AtomsResult:
        """Search memory atoms (typed facts: episodic, planned, factual, relational, preference,
        unknown) by text; active atoms only, scored by relevance times how valid they still are."""
        reject_lone_surrogates("query", query)
        if not query.strip():
            raise ToolError("query is empty: say what to look for")
        max_k = live.current.memory.recall_max_k
        if not 1 <= k <= max_k:
            raise ToolError(f"k must be between 1 and {max_k}, got {k}")
        hits = deps.atom_search.search(query[:MAX_QUERY_CHARS], k, types,
                                       checked_id(persona_id, "persona_id"),
                                       checked_id(session_id, "session_id"))
        return AtomsResult(atoms=[AtomOut.of(h.row, h.score, h.time_factor) for h in hits])

    @server.tool()
    @translate_errors
    def memory_maintenance(action: MaintenanceAction) -> MaintenanceResult:
        """Run upkeep now: decay (importance decay due since the last run), archive (old and
        unimportant memories), atoms (expire / forget / purge atoms), backup, reconcile (re-queue
        unfinished work), or all. Reports what each step changed."""
        import time

        from shared.lifecycle import run_action

        changed = run_action(action, deps.lifecycle, deps.reconcile_queue, time.time())
        return MaintenanceResult(action=action, changed=changed)

    @server.tool()
    @translate_errors
    def list_memories(limit: ListLimit = 20, offset: Offset = 0, session_id: str | None = None,
                      persona_id: str | None = None) -> ListResult:
        """List stored memories, newest first, with the total count for paging."""
        if not 1 <= limit <= MAX_LIST_LIMIT:
            raise ToolError(f"limit must be between 1 and {MAX_LIST_LIMIT}, got {limit}")
        if offset < 0:
            raise ToolError(f"offset must be 0 or more, got {offset}")
        scope = DocumentFilter(session_id=checked_id(session_id, "session_id"),
                               persona_id=checked_id(persona_id, "persona_id"),
                               include_archived=True)
        docs, total = store.list(limit, offset, scope)
        return ListResult(memories=[MemoryOut.of(d) for d in docs], total=total,
                          limit=limit, offset=offset)

    @server.tool()
    @translate_errors
    def edit_memory(id: MemoryId, content: str | None = None,
                    metadata: MemoryMetadata | None = None) -> EditResult:
        """Change a memory's content and/or some metadata keys (others stay as they were)."""
        if content is not None:
            content = checked_content(content, live.current.server.max_content_chars)
        changes = metadata.changes() if metadata is not None else {}
        if content is None and not changes:
            raise ToolError("nothing to change: give content and/or metadata")
        doc = memories.edit(id, content, changes)
        return EditResult(id=doc.id, memory=MemoryOut.of(doc))

    @server.tool()
    @translate_errors
    def delete_memory(id: MemoryId) -> DeleteResult:
        """Delete a memory and everything derived from it; returns the rows removed per table."""
        return DeleteResult(id=id, removed=memories.delete(id))

    @server.tool()
    @translate_errors
    def pin_memory(id: MemoryId, pinned: Flag = True) -> PinResult:
        """Pin a memory (it never decays or gets archived), or unpin it with pinned=false."""
        doc = memories.set_pinned(id, pinned)
        return PinResult(id=doc.id, pinned=doc.fields.pinned)

    @server.tool()
    @translate_errors
    def memory_stats() -> StatsResult:
        """Counts of memories, background stages, vectors and rows in every table."""
        path = store.db.path
        size = sum(os.path.getsize(p) for p in (path, path.with_name(path.name + "-wal"))
                   if p.exists())
        figures = pipeline_figures(store.db, deps.index, live.current.worker)
        return StatsResult(documents=DocumentCounts(**store.stats()), tables=consistency.all_table_counts(store.db),
                           database={"path": str(path), "size_bytes": size},
                           summarizer=summarizer_figures(store.db, live.current.summarizer), **figures)


def _hit(hit: Hit) -> RecallHit:
    doc, f = hit.document, hit.document.fields
    return RecallHit(
        id=doc.id, text=f.persona_summary or doc.text, score=round(hit.score, 6),
        importance=f.importance, pinned=f.pinned,
        original_time=f.original_time.isoformat() if f.original_time else None,
        topics=list(f.topics), participants=list(f.participants),
        session_id=f.session_id, persona_id=f.persona_id, explain=hit.explain)


def conversation_turns(conversation) -> list[Turn]:
    """summarize_memory's conversation as turns, within the size limits."""
    if isinstance(conversation, str) and len(conversation) > MAX_CONVERSATION_CHARS:
        raise ToolError(f"conversation is {len(conversation)} characters; the limit is "
                        f"{MAX_CONVERSATION_CHARS}: summarize it in parts")
    if isinstance(conversation, list) and len(conversation) > MAX_CONVERSATION_TURNS:
        raise ToolError(f"conversation has {len(conversation)} turns; the limit is "
                        f"{MAX_CONVERSATION_TURNS}: summarize it in parts")
    turns = parse_conversation(conversation)
    if sum(len(t.speaker) + len(t.text) for t in turns) > MAX_CONVERSATION_CHARS:
        raise ToolError(f"conversation holds more than {MAX_CONVERSATION_CHARS} characters: "
                        "summarize it in parts")
    for number, turn in enumerate(turns, 1):
        reject_lone_surrogates(f"conversation turn {number}", turn.speaker + turn.text)
    return turns


def time_bound(value: str | None, name: str) -> float | None:
    """An optional ISO-8601 bound as epoch seconds (naive times are UTC)."""
    if value is None:
        return None
    reject_lone_surrogates(name, value)
    return epoch(parse_iso(value, name))


