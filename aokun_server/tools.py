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
from mcp.types import ToolAnnotations
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


def tool(server: MCPServer, title: str, *, read_only: bool = False, destructive: bool = False,
         idempotent: bool = False, open_world: bool = False):
    """server.tool() with a human title and the behaviour hints hosts use to decide which calls
    to confirm with the user. Every hint is given, so no host falls back to the protocol's
    defaults (which assume a destructive, open-world tool)."""
    return server.tool(title=title, annotations=ToolAnnotations(
        title=title, read_only_hint=read_only, destructive_hint=destructive,
        idempotent_hint=idempotent or read_only, open_world_hint=open_world))


def register_tools(server: MCPServer, deps: ToolDeps) -> None:
    """Add every Aokun tool to server. The docstrings are the descriptions a model reads to
    decide when to call each tool; keep them true to the code."""
    memories, store, live = deps.memories, deps.memories.documents, deps.live

    @tool(server, "Remember")  # every call adds a memory: not idempotent
    @translate_errors
    def memorize(content: str, metadata: MemoryMetadata = MemoryMetadata()) -> MemorizeResult:
        """Save something worth knowing in later conversations: a fact about the user, a
        preference, an event, a plan, a decision. Call it when the user tells you something they
        would expect you to remember next time, or asks you to remember it; one memory per fact
        or event, in the user's own language. Calling it twice stores two memories.

        metadata (all optional): topics, participants, key_facts (lists of strings);
        sentiment (positive | neutral | negative); importance (0.0-1.0, default 0.5);
        pinned (never decays); session_id; persona_id (whose memory this is);
        original_time (ISO-8601, when it happened); persona_summary.
        The memory is committed before this returns."""
        content = checked_content(content, live.current.server.max_content_chars)
        doc = memories.memorize(content, metadata.to_fields())
        return MemorizeResult(id=doc.id, text=doc.text, persona_id=doc.fields.persona_id,
                              session_id=doc.fields.session_id)

    # With store=true it adds a memory (once per conversation); provider=llm calls the
    # configured model, an outside service, and spends tokens on every call: not idempotent.
    @tool(server, "Summarize a conversation into a memory", open_world=True)
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

    # Read-only as hosts mean it: no memory changes; recall only records the access
    # (access_count, last access), which slows the recalled memories' decay.
    @tool(server, "Recall memories", read_only=True)
    @translate_errors
    def recall(query: str, k: K | None = None, session_id: str | None = None,
               persona_id: str | None = None, include_archived: Flag = False,
               since: str | None = None, until: str | None = None,
               explain: Flag = False) -> RecallResult:
        """Look up what you were told in earlier conversations. Call it before answering
        whenever the user refers to their past, people, preferences or plans, or when context
        from earlier sessions would help; returns the memories most relevant to query, best
        first (k results, at most 15), each with its text and time.

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

    @tool(server, "Search facts and plans", read_only=True)
    @translate_errors
    def search_atoms(query: str | None = None, k: K = 5, types: list[AtomType] | None = None,
                     persona_id: str | None = None, session_id: str | None = None) -> AtomsResult:
        """Find typed facts distilled from memories: planned (plans with deadlines), preference,
        factual, relational, episodic, unknown. Call it for questions like "what are my
        upcoming plans" (types=["planned"], no query: plans still ahead, soonest deadline
        first) or "what do I like" (types=["preference"]). With a query, atoms matching it come
        first, scored by relevance times how valid they still are; with types, the other
        still-valid atoms of those types fill the remaining places (score 0, newest first after
        dated plans). Active atoms only; give a query, types or both."""
        text = ""
        if query is not None:
            reject_lone_surrogates("query", query)
            text = query.strip()[:MAX_QUERY_CHARS]
        if not text and not types:
            raise ToolError('give a query, or types to list (e.g. types=["planned"] for upcoming plans)')
        max_k = live.current.memory.recall_max_k
        if not 1 <= k <= max_k:
            raise ToolError(f"k must be between 1 and {max_k}, got {k}")
        hits = deps.atom_search.search(text or None, k, types,
                                       checked_id(persona_id, "persona_id"),
                                       checked_id(session_id, "session_id"))
        return AtomsResult(atoms=[AtomOut.of(h.row, h.score, h.time_factor) for h in hits])

    # Archives memories and expires / forgets / purges atoms; each backup is a new file.
    @tool(server, "Run memory upkeep", destructive=True)
    @translate_errors
    def memory_maintenance(action: MaintenanceAction) -> MaintenanceResult:
        """Run upkeep now instead of waiting for the worker's schedule; call it only when the
        user or an operator asks. decay (importance decay due since the last run), archive
        (old and unimportant memories leave recall), atoms (expire / forget / purge atoms past
        their time), backup, reconcile (re-queue unfinished work), or all. Reports what each
        step changed."""
        import time

        from shared.lifecycle import run_action

        changed = run_action(action, deps.lifecycle, deps.reconcile_queue, time.time())
        return MaintenanceResult(action=action, changed=changed)

    @tool(server, "List memories", read_only=True)
    @translate_errors
    def list_memories(limit: ListLimit = 20, offset: Offset = 0, session_id: str | None = None,
                      persona_id: str | None = None) -> ListResult:
        """Browse stored memories, newest first, with the total count for paging (archived ones
        included). Call it to review what is stored, e.g. to find a memory's id before editing
        or deleting it; to find memories about something, use recall."""
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

    # Overwrites what was stored (the old text is not kept); the same edit twice leaves the same memory.
    @tool(server, "Edit a memory", destructive=True, idempotent=True)
    @translate_errors
    def edit_memory(id: MemoryId, content: str | None = None,
                    metadata: MemoryMetadata | None = None) -> EditResult:
        """Correct or update a stored memory: replace its content and/or some metadata keys
        (the others stay as they were; the old content is not kept). Call it when the user
        corrects something remembered or a fact changed, instead of storing a contradiction."""
        if content is not None:
            content = checked_content(content, live.current.server.max_content_chars)
        changes = metadata.changes() if metadata is not None else {}
        if content is None and not changes:
            raise ToolError("nothing to change: give content and/or metadata")
        doc = memories.edit(id, content, changes)
        return EditResult(id=doc.id, memory=MemoryOut.of(doc))

    # A second delete of the same id changes nothing (it reports that the memory is not found).
    @tool(server, "Delete a memory", destructive=True, idempotent=True)
    @translate_errors
    def delete_memory(id: MemoryId) -> DeleteResult:
        """Permanently delete a memory and everything derived from it (atoms, graph facts,
        vectors); returns the rows removed per table. Call it only when the user asks you to
        forget something. Backups taken earlier keep it until they age out."""
        return DeleteResult(id=id, removed=memories.delete(id))

    @tool(server, "Pin or unpin a memory", idempotent=True)
    @translate_errors
    def pin_memory(id: MemoryId, pinned: Flag = True) -> PinResult:
        """Pin a memory so it never decays or gets archived, or unpin it with pinned=false. Call
        it when the user says something must always be remembered."""
        doc = memories.set_pinned(id, pinned)
        return PinResult(id=doc.id, pinned=doc.fields.pinned)

    @tool(server, "Memory statistics", read_only=True)
    @translate_errors
    def memory_stats() -> StatsResult:
        """Counts of memories, background work (pending, failed stages), vectors and rows in
        every table, with warnings. Call it to check the memory server's health, or why a new
        memory is not found by meaning yet (its vector still waits for a worker)."""
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
        id=doc.id, text=doc.text, persona_summary=f.persona_summary, score=round(hit.score, 6),
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


