"""The tools that search: recall, search_atoms, list_memories, and how their answers read.
Each is `tool(deps, **arguments)`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated

from mcp.types import CallToolResult, TextContent

from aokun_server.params import (
    AtomQuery,
    AtomTypes,
    Explain,
    HappensAfter,
    HappensBefore,
    IncludeArchived,
    ListLimit,
    MaxChars,
    MinScore,
    Offset,
    PersonaFilter,
    Query,
    SessionFilter,
    Since,
    Until,
)
from aokun_server.tooling import checked_id, day_end_bound, described, time_bound
from aokun_server.tools.deps import ToolDeps
from shared.access import read_personas
from shared.api.models import (
    AtomOut,
    AtomsResult,
    ListResult,
    MemoryOut,
    RecallHit,
    RecallResult,
    reject_lone_surrogates,
)
from shared.errors import InvalidInput
from shared.search import answer
from shared.search.atom_search import AtomHit
from shared.search.persona_merge import merged, recall_over_personas
from shared.search.recall import Hit, RecallRequest, floors
from shared.store.model.documents import DocumentFilter
from shared.time_zone import user_zone

MAX_QUERY_CHARS = 100_000
# k's type as registered is built per server (register_tools: bounded by memory.recall_max_k);
# called directly, a tool takes any k.
K = Annotated[int | None, "replaced by k_param when registered"]


# Read-only as hosts mean it: no memory changes; recall only records the access
# (access_count, last access), which slows the recalled memories' decay.
@described("Recall memories", read_only=True)
def recall(deps: ToolDeps, query: Query, k: K = None, session_id: SessionFilter = None,
           persona_id: PersonaFilter = None, include_archived: IncludeArchived = False,
           since: Since = None, until: Until = None, explain: Explain = False,
           min_score: MinScore = None, max_chars: MaxChars = None,
           happens_after: HappensAfter = None, happens_before: HappensBefore = None
           ) -> Annotated[CallToolResult, RecallResult]:
    """Look up what you were told in earlier conversations. Call it before answering
    whenever the user refers to their past, people, preferences or plans, or when context
    from earlier sessions would help. Returns the memories relevant enough to query (score:
    the probability that a memory is relevant; at least min_score), best first, at most k;
    nothing when none is, which means you were not told about it. The text answer is
    one line a memory: [id · score] its text, which starts with when it happened; the
    structured answer has every field. The same text stored twice comes back once, the
    other ids in duplicates.

    For a question about when things happen — plans, appointments, what is coming up, what
    the user did last week — pass its dates as happens_after / happens_before (they read a
    plan's date and an event's date); use since / until only to bound when a memory was told
    (original_time). Time words in the query itself ("next week", 明天, "recently") are read
    the same way when you give no window: what happens then ranks first, plans soonest
    first. Filter by session_id or persona_id to stay within one conversation or one user.
    max_chars keeps the text answer within a budget. explain=true adds, per result, the channels that found it and
    the score parts."""
    live = deps.live
    reject_lone_surrogates("query", query)
    if not query.strip():
        raise InvalidInput("query is empty: say what to look for")
    zone = user_zone(live.now.memory.time_zone)
    start, end = time_bound(since, "since", zone), time_bound(until, "until", zone)
    if start is not None and end is not None and start > end:
        raise InvalidInput(f"since ({since}) is after until ({until})")
    after = time_bound(happens_after, "happens_after", zone)
    before = day_end_bound(happens_before, "happens_before", zone)
    if after is not None and before is not None and after >= before:
        raise InvalidInput(f"happens_after ({happens_after}) is not before happens_before ({happens_before})")
    personas = read_personas(deps.principal(), checked_id(persona_id, "persona_id"))
    scope = DocumentFilter(session_id=checked_id(session_id, "session_id"),
                           include_archived=include_archived, since=start, until=end)
    floor = floors(live.now.retrieval, min_score)
    hits = recall_over_personas(deps.recaller.recall, RecallRequest(
        query[:MAX_QUERY_CHARS], k or live.now.memory.recall_top_k, scope, explain,
        max_chars=max_chars, happens_after=after, happens_before=before, zone=zone, **floor), personas)
    # Only what the host was given above the configured floor grows stronger: a caller that
    # asks with min_score=0 gets filler too, and filler must not be kept from fading.
    given = floors(live.now.retrieval, None)["min_score"]
    deps.reinforcer.touch([h.document.id for h in hits if h.score >= given])
    return recall_answer(hits, floor["min_score"], max_chars)


@described("Search facts and plans", read_only=True)
def search_atoms(deps: ToolDeps, query: AtomQuery = None, k: K = None, types: AtomTypes = None,
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
        raise InvalidInput('give a query, or types to list (e.g. types=["planned"] for upcoming plans)')
    personas = read_personas(deps.principal(), checked_id(persona_id, "persona_id"))
    floor = deps.live.now.retrieval.min_score if min_score is None else min_score
    session = checked_id(session_id, "session_id")
    hits = merged([deps.atom_search.search(text or None, k or 5, types, persona, session)
                   for persona in personas], k or 5)
    return atoms_answer([h for h in hits if h.score == 0 or h.score >= floor], floor,
                        bool(text), types)


@described("List memories", read_only=True)
def list_memories(deps: ToolDeps, limit: ListLimit = 20, offset: Offset = 0,
                  session_id: SessionFilter = None, persona_id: PersonaFilter = None) -> ListResult:
    """Browse stored memories, newest first, with the total count for paging (archived ones
    included). Call it to review what is stored, e.g. to find a memory's id before editing
    or deleting it; to find memories about something, use recall."""
    personas = read_personas(deps.principal(), checked_id(persona_id, "persona_id"))
    scope = DocumentFilter(session_id=checked_id(session_id, "session_id"), include_archived=True)
    docs, total = listed_in(deps, limit, offset, scope, personas)
    return ListResult(memories=[MemoryOut.of(d) for d in docs], total=total,
                      limit=limit, offset=offset)


# The tools whose k is bounded by the running server's memory.recall_max_k.
WITH_K = (recall, search_atoms)


# -- list_memories over the personas a call may see (shared/access.py: read_personas) -------


def listed_in(deps: ToolDeps, limit: int, offset: int, scope: DocumentFilter,
              personas: tuple[str | None, ...]) -> tuple[list, int]:
    """list_memories over several personas: each one's newest offset+limit, merged newest
    first (ids grow with time), and the totals summed; one snapshot for all."""
    if len(personas) == 1:
        return deps.store.documents.list(limit, offset, replace(scope, persona_id=personas[0]))
    with deps.store.read() as session:
        pages = [session.documents.list(offset + limit, 0, replace(scope, persona_id=persona))
                 for persona in personas]
    docs = sorted((doc for page, _ in pages for doc in page), key=lambda doc: -doc.id)
    return docs[offset:offset + limit], sum(total for _, total in pages)


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
                 types: Sequence[str] | None) -> CallToolResult:
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
