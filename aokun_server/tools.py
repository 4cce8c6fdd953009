"""The MCP tools: argument checks, one store call each, errors translated to ToolError.

Tools are plain `def`s: the SDK runs them in worker threads, and each thread has its own
SQLite connection, so a slow write never blocks the event loop. Every write goes through the
memory service (shared/memories.py), like every other entry point.
"""

# No `from __future__ import annotations`: k's type is built per server (k_param, from the
# configured recall_max_k) and the SDK reads each tool's annotations as objects.

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Callable

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from aokun_server.ingest import dated, memory_fields
from aokun_server.models import (
    AtomOut, AtomsResult, Conversation, DeleteResult, DocumentCounts, EditResult,
    ListResult, MaintenanceResult, MemorizeResult, MemoryMetadata, MemoryOut, PinResult, RecallHit,
    RecallResult, StatsResult, SummarizeResult, reject_lone_surrogates,
)
from aokun_server.params import (
    Action, AtomQuery, AtomTypes, Content, Explain, IncludeArchived, ListLimit, MaxChars,
    Metadata, MetadataChanges, MemoryId, MinScore, NewContent, Offset, PersonaFilter, PersonaOf,
    Pinned, Provider, Query, SessionFilter, SessionOf, Since, Store, Until, k_param,
)
from aokun_server.pipeline import Reinforcer, pipeline_figures, summarizer_figures
from aokun_server.tooling import (checked_content, checked_id, conversation_turns, time_bound,
                                  tool, translate_errors)
from shared.lifecycle import Lifecycle
from shared.live_config import LiveConfig
from shared.search import answer
from shared.search.atoms import AtomHit, AtomSearch
from shared.assembly import LiveRecaller
from shared.search.recall import Hit, RecallRequest, floors
from shared.search.vectors import VectorIndex
from shared.memories import MemoryService
from shared.store import consistency
from shared.store.documents import DocumentFilter

if TYPE_CHECKING:
    from shared.summarize.summarizer import Summarizer

__all__ = ["ToolDeps", "register_tools", "checked_content"]

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
    summarizer: "Summarizer"


def register_tools(server: MCPServer, deps: ToolDeps) -> None:
    """Add every Aokun tool to server. The docstrings are the descriptions a model reads to
    decide when to call each tool, and each parameter's type (aokun_server/params.py) carries
    its own; keep them true to the code."""
    _writing_tools(server, deps)
    _searching_tools(server, deps)
    _operating_tools(server, deps)


def _writing_tools(server: MCPServer, deps: ToolDeps) -> None:
    memories, live = deps.memories, deps.live

    @tool(server, "Remember")  # every call adds a memory: not idempotent
    @translate_errors
    def memorize(content: Content, metadata: Metadata = MemoryMetadata()) -> MemorizeResult:
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
    def summarize_memory(conversation: Conversation, persona_id: PersonaOf = None,
                         session_id: SessionOf = None, store: Store = False,
                         provider: Provider = None) -> SummarizeResult:
        """Turn a conversation into a structured memory: a summary, topics, participants, key
        facts (stand-alone sentences with the speaker as subject and dates resolved),
        sentiment and importance. Call it when a conversation ends, or before older turns
        leave your context, instead of writing the memory yourself; store=true also memorizes
        it (the same conversation stored twice stays one memory) and returns the receipt.
        conversation: a list of turns {speaker, text, time?} or one "Name: text" transcript."""
        turns = dated(conversation_turns(conversation), datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0))
        memory = deps.summarizer.summarize(turns, provider)
        if not store:
            return SummarizeResult(**memory.model_dump(), persona_id=persona_id, session_id=session_id)
        content = checked_content(memory.summary, live.current.server.max_content_chars)
        doc, created = memories.memorize_once(content, memory_fields(memory, turns, persona_id, session_id))
        return SummarizeResult(**memory.model_dump(), id=doc.id, text=doc.text,
                               status="accepted" if created else "already stored", stored=created,
                               persona_id=doc.fields.persona_id, session_id=doc.fields.session_id)

    # Overwrites what was stored (the old text is not kept); the same edit twice leaves the same memory.
    @tool(server, "Edit a memory", destructive=True, idempotent=True)
    @translate_errors
    def edit_memory(id: MemoryId, content: NewContent = None,
                    metadata: MetadataChanges = None) -> EditResult:
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
    def pin_memory(id: MemoryId, pinned: Pinned = True) -> PinResult:
        """Pin a memory so it never decays or gets archived, or unpin it with pinned=false. Call
        it when the user says something must always be remembered."""
        doc = memories.set_pinned(id, pinned)
        return PinResult(id=doc.id, pinned=doc.fields.pinned)


def _searching_tools(server: MCPServer, deps: ToolDeps) -> None:
    store, live = deps.memories.documents, deps.live
    max_k = live.current.memory.recall_max_k
    K = k_param(max_k, lambda: live.current.memory.recall_max_k)

    # Read-only as hosts mean it: no memory changes; recall only records the access
    # (access_count, last access), which slows the recalled memories' decay.
    @tool(server, "Recall memories", read_only=True)
    @translate_errors
    def recall(query: Query, k: K = None, session_id: SessionFilter = None,
               persona_id: PersonaFilter = None, include_archived: IncludeArchived = False,
               since: Since = None, until: Until = None, explain: Explain = False,
               min_score: MinScore = None, max_chars: MaxChars = None
               ) -> Annotated[CallToolResult, RecallResult]:
        """Look up what you were told in earlier conversations. Call it before answering
        whenever the user refers to their past, people, preferences or plans, or when context
        from earlier sessions would help. Returns the memories relevant enough to query (score:
        the probability that a memory is relevant; at least min_score), best first, at most k;
        nothing when none is, which means you were not told about it. The text answer is
        one line a memory: [id · score] its text, which starts with when it happened; the
        structured answer has every field. The same text stored twice comes back once, the
        other ids in duplicates.

        Filter by session_id or persona_id to stay within one conversation or one user;
        since / until bound when the memory happened (original_time). max_chars keeps the text
        answer within a budget. explain=true adds, per result, the channels that found it and
        the score parts."""
        reject_lone_surrogates("query", query)
        if not query.strip():
            raise ToolError("query is empty: say what to look for")
        start, end = time_bound(since, "since"), time_bound(until, "until")
        if start is not None and end is not None and start > end:
            raise ToolError(f"since ({since}) is after until ({until})")
        scope = DocumentFilter(session_id=checked_id(session_id, "session_id"),
                               persona_id=checked_id(persona_id, "persona_id"),
                               include_archived=include_archived, since=start, until=end)
        floor = floors(live.current.retrieval, min_score)
        hits = deps.recaller.recall(RecallRequest(
            query[:MAX_QUERY_CHARS], k or live.current.memory.recall_top_k, scope, explain,
            max_chars=max_chars, **floor))
        deps.reinforcer.touch([h.document.id for h in hits])
        return recall_answer(hits, floor["min_score"], max_chars)

    @tool(server, "Search facts and plans", read_only=True)
    @translate_errors
    def search_atoms(query: AtomQuery = None, k: K = None, types: AtomTypes = None,
                     persona_id: PersonaFilter = None, session_id: SessionFilter = None,
                     min_score: MinScore = None) -> Annotated[CallToolResult, AtomsResult]:
        """Find typed facts distilled from memories: planned (plans with deadlines), preference,
        factual, relational, episodic, unknown. Call it for questions like "what are my
        upcoming plans" (types=["planned"], no query: plans still ahead, soonest deadline
        first) or "what do I like" (types=["preference"]). With a query, atoms matching it
        come first, scored by relevance times how valid they still are, those below min_score
        left out; with types, the other still-valid atoms of those types fill the remaining
        places (score 0: listed for types, not found by the query, so min_score does not
        apply; newest first after dated plans). k: default 5. Active atoms only; give a
        query, types or both."""
        text = ""
        if query is not None:
            reject_lone_surrogates("query", query)
            text = query.strip()[:MAX_QUERY_CHARS]
        if not text and not types:
            raise ToolError('give a query, or types to list (e.g. types=["planned"] for upcoming plans)')
        floor = live.current.retrieval.min_score if min_score is None else min_score
        hits = deps.atom_search.search(text or None, k or 5, types,
                                       checked_id(persona_id, "persona_id"),
                                       checked_id(session_id, "session_id"))
        return atoms_answer([h for h in hits if h.score == 0 or h.score >= floor], floor,
                            bool(text), types)

    @tool(server, "List memories", read_only=True)
    @translate_errors
    def list_memories(limit: ListLimit = 20, offset: Offset = 0, session_id: SessionFilter = None,
                      persona_id: PersonaFilter = None) -> ListResult:
        """Browse stored memories, newest first, with the total count for paging (archived ones
        included). Call it to review what is stored, e.g. to find a memory's id before editing
        or deleting it; to find memories about something, use recall."""
        scope = DocumentFilter(session_id=checked_id(session_id, "session_id"),
                               persona_id=checked_id(persona_id, "persona_id"),
                               include_archived=True)
        docs, total = store.list(limit, offset, scope)
        return ListResult(memories=[MemoryOut.of(d) for d in docs], total=total,
                          limit=limit, offset=offset)


def _operating_tools(server: MCPServer, deps: ToolDeps) -> None:
    store, live = deps.memories.documents, deps.live

    # Archives memories and expires / forgets / purges atoms; each backup is a new file.
    @tool(server, "Run memory upkeep", destructive=True)
    @translate_errors
    def memory_maintenance(action: Action) -> MaintenanceResult:
        """Run upkeep now instead of waiting for the worker's schedule; call it only when the
        user or an operator asks. decay (importance decay due since the last run), archive
        (old and unimportant memories leave recall), atoms (expire / forget / purge atoms past
        their time), backup, reconcile (re-queue unfinished work), or all. Reports what each
        step changed."""
        import time

        from shared.lifecycle import run_action

        changed = run_action(action, deps.lifecycle, deps.reconcile_queue, time.time())
        return MaintenanceResult(action=action, changed=changed)

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
        session_id=f.session_id, persona_id=f.persona_id, explain=hit.explain,
        duplicates=list(hit.duplicates))


def recall_answer(hits: list[Hit], min_score: float, max_chars: int | None) -> CallToolResult:
    """Every field as structured content; as text, one line a memory (shared/search/answer.py)."""
    result = RecallResult(results=[_hit(h) for h in hits])
    return CallToolResult(
        content=[TextContent(type="text", text=answer.text_of(hits, min_score, max_chars))],
        structured_content=result.model_dump(mode="json"))


def atoms_answer(hits: list[AtomHit], min_score: float, asked: bool,
                 types: list[str] | None) -> CallToolResult:
    """The atoms as structured content and as one line of JSON; when there are none, a
    sentence saying why."""
    result = AtomsResult(atoms=[AtomOut.of(h.row, h.score, h.time_factor) for h in hits])
    text = result.model_dump_json(exclude_none=True)
    if not hits:
        kinds = f" of type {', '.join(types)}" if types else ""
        text = (f"No active atom{kinds} is relevant enough to this query (min_score {min_score:g})."
                if asked else f"No active atom{kinds}.")
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=result.model_dump(mode="json"))
