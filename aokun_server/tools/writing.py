"""The tools that write: memorize, summarize_memory, edit_memory, delete_memory, pin_memory.
Each is `tool(deps, **arguments)`; what a memory may hold is the memory service's rule."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from functools import partial

import anyio

from aokun_server.params import (
    Content,
    MemoryId,
    Metadata,
    MetadataChanges,
    NewContent,
    PersonaOf,
    Pinned,
    Provider,
    SessionOf,
    Store,
)
from aokun_server.tooling import conversation_turns, described
from aokun_server.tools.deps import ToolDeps
from shared.access import memorize_persona
from shared.api.models import (
    Conversation,
    DeleteResult,
    EditResult,
    MemorizeResult,
    MemoryMetadata,
    MemoryOut,
    PinResult,
    SummarizeResult,
)
from shared.summarize.transcripts import dated, memory_fields
from shared.time_zone import user_zone


@described("Remember")  # every call adds a memory: not idempotent
def memorize(deps: ToolDeps, content: Content, metadata: Metadata = MemoryMetadata()) -> MemorizeResult:
    """Save something worth knowing in later conversations: a fact about the user, a
    preference, an event, a plan, a decision. Call it when the user tells you something they
    would expect you to remember next time, or asks you to remember it; one memory per fact
    or event, in the user's own language. Calling it twice stores two memories.

    metadata (all optional): topics, participants, key_facts (lists of strings);
    sentiment (positive | neutral | negative); importance (0.0-1.0, default 0.5);
    pinned (never decays); session_id; persona_id (whose memory this is; leave it out
    for the user's own, the default);
    original_time (ISO-8601, when it happened); persona_summary.
    The memory is committed before this returns."""
    fields = metadata.to_fields()
    fields = replace(fields, persona_id=memorize_persona(deps.principal(), fields.persona_id,
                                                       deps.live.now.memory.default_persona_id))
    doc = deps.memories.memorize(content, fields)
    return MemorizeResult(id=doc.id, text=doc.text, persona_id=doc.fields.persona_id,
                          session_id=doc.fields.session_id)


# With store=true it adds a memory (once per conversation); provider=llm calls the
# configured model, an outside service, and spends tokens on every call: not idempotent.
@described("Summarize a conversation into a memory", open_world=True)
async def summarize_memory(deps: ToolDeps, conversation: Conversation, persona_id: PersonaOf = None,
                           session_id: SessionOf = None, store: Store = False,
                           provider: Provider = None) -> SummarizeResult:
    """Turn a conversation into a structured memory: a summary, topics, participants, key
    facts (stand-alone sentences with the speaker as subject and dates resolved),
    sentiment and importance. Call it when a conversation ends, or before older turns
    leave your context, instead of writing the memory yourself; store=true also memorizes
    it (the same conversation stored twice stays one memory) and returns the receipt.
    conversation: a list of turns {speaker, text, time?} or one "Name: text" transcript."""
    if store:  # here, in the request's context: the pools below do not carry it
        persona_id = memorize_persona(deps.principal(), persona_id, deps.live.now.memory.default_persona_id)
    work = partial(summarized, deps, conversation, persona_id, session_id, store, provider)
    if deps.summarizer.uses_model(provider):
        # It may wait on the model for its whole timeout: in the model's own bounded pool,
        # never in the threads memorize and recall run in.
        return await deps.model_calls.run(work)
    return await anyio.to_thread.run_sync(work)


def summarized(deps: ToolDeps, conversation: Conversation, persona_id: str | None,
               session_id: str | None, store: bool, provider: str | None) -> SummarizeResult:
    """summarize_memory's work, in whichever thread it was given."""
    turns = dated(conversation_turns(conversation), datetime.now(timezone.utc).replace(microsecond=0),
                  user_zone(deps.live.now.memory.time_zone))
    memory = deps.summarizer.summarize(turns, provider)
    if not store:
        return SummarizeResult(**memory.model_dump(), persona_id=persona_id, session_id=session_id)
    fields = memory_fields(memory, turns, persona_id, session_id)
    doc, created = deps.memories.memorize_once(memory.summary, fields)
    return SummarizeResult(**memory.model_dump(), id=doc.id, text=doc.text,
                           status="accepted" if created else "already stored", stored=created,
                           persona_id=doc.fields.persona_id, session_id=doc.fields.session_id)


# Overwrites what was stored (the old text is not kept); the same edit twice leaves the same memory.
@described("Edit a memory", destructive=True, idempotent=True)
def edit_memory(deps: ToolDeps, id: MemoryId, content: NewContent = None,
                metadata: MetadataChanges = None) -> EditResult:
    """Correct or update a stored memory: replace its content and/or some metadata keys
    (the others stay as they were; the old content is not kept). Call it when the user
    corrects something remembered or a fact changed, instead of storing a contradiction."""
    changes = metadata.changes() if metadata is not None else {}
    doc = deps.memories.edit(id, content, changes, deps.principal())
    return EditResult(id=doc.id, memory=MemoryOut.of(doc))


# A second delete of the same id changes nothing (it reports that the memory is not found).
@described("Delete a memory", destructive=True, idempotent=True)
def delete_memory(deps: ToolDeps, id: MemoryId) -> DeleteResult:
    """Permanently delete a memory and everything derived from it (atoms, graph facts,
    vectors); returns the rows removed per table. Call it only when the user asks you to
    forget something. Backups taken earlier keep it until they age out: backups_holding
    names them."""
    receipt = deps.memories.delete(id, deps.principal())
    return DeleteResult(id=id, removed=dict(receipt), backups_holding=receipt.backups_holding)


@described("Pin or unpin a memory", idempotent=True)
def pin_memory(deps: ToolDeps, id: MemoryId, pinned: Pinned = True) -> PinResult:
    """Pin a memory so it never decays or gets archived, or unpin it with pinned=false. Call
    it when the user says something must always be remembered."""
    doc = deps.memories.set_pinned(id, pinned, deps.principal())
    return PinResult(id=doc.id, pinned=doc.fields.pinned)
