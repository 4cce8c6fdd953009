"""The API schema: typed tool arguments and results, which the panel's forms use too.

Arguments are strict pydantic models and annotated types, so the SDK rejects a wrong type, an
unknown metadata key or an out-of-range value before a tool runs; shared/api/validation.py
turns pydantic's report into one line naming the field. The schema
describes the memory service's rules (shared/memory_rules.py) from the same constants, and the
service checks again: its rule is the one that decides, for every entry point. Results are
models too: a tool annotated `-> dict` would send no structured content.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal, cast, overload

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from shared.errors import InvalidInput
from shared.lifecycle import MaintenanceAction
from shared.memory_rules import EARLIEST_YEAR, LATEST_YEAR, MAX_ID_CHARS, lone_surrogate_problem
from shared.store.model.atoms import AtomType
from shared.store.model.documents import (
    MAX_KEY_FACT_CHARS,
    MAX_LABEL_CHARS,
    MAX_LIST_ITEMS,
    MAX_SUMMARY_CHARS,
    Document,
    MemoryFields,
    Sentiment,
)
from shared.summarize.schema import StructuredMemory

# Limits on what a caller may store are the memory service's (shared/memory_rules.py,
# shared/store/model/documents.py); these are the tools' own.
MAX_LIST_LIMIT = 200
# A conversation to summarize: a long session, not a book.
MAX_CONVERSATION_CHARS = 2_000_000
MAX_CONVERSATION_TURNS = 20_000
# SQLite stores integers in 64 bits; a larger id, offset or count cannot mean anything.
MAX_INT64 = 2**63 - 1


def reject_lone_surrogates(name: str, value: str) -> str:
    """Text that cannot be stored as UTF-8 (a lone surrogate) is refused (InvalidInput), not
    mangled."""
    problem = lone_surrogate_problem(value)
    if problem:
        raise InvalidInput(f"{name} {problem}")
    return value


def _storable(value: str) -> str:
    problem = lone_surrogate_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _list_item(value: str) -> str:
    _storable(value)
    if not value.strip():
        raise ValueError("is an empty string: give text or leave the item out")
    return value


# -- types for metadata (the tools' own parameters: aokun_server/params.py) --------------------------------------

Label = Annotated[str, Field(max_length=MAX_LABEL_CHARS), AfterValidator(_list_item)]
KeyFact = Annotated[str, Field(max_length=MAX_KEY_FACT_CHARS), AfterValidator(_list_item)]
ScopeId = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS), AfterValidator(_storable)]
Summary = Annotated[str, Field(max_length=MAX_SUMMARY_CHARS), AfterValidator(_storable)]


# A conversation is checked by shared.summarize.parse_conversation, whose messages name the
# turn ("conversation[2].text must be a string"); a pydantic union would report each branch.
Conversation = Annotated[object, WithJsonSchema({
    "description": 'a list of turns {speaker, text, time?} (time ISO-8601), or one transcript '
                   'string of "Name: text" lines (a line without a name continues the turn before)',
    "anyOf": [
        {"type": "array", "items": {
            "type": "object", "required": ["text"], "additionalProperties": False,
            "properties": {"speaker": {"type": "string"}, "text": {"type": "string"},
                           "time": {"type": "string", "description": "ISO-8601"}}}},
        {"type": "string"},
    ]})]


class MemoryMetadata(BaseModel):
    """Optional facts about a memory. Unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    topics: list[Label] = Field(default_factory=list, max_length=MAX_LIST_ITEMS,
                                description="what the memory is about, a few words each")
    participants: list[Label] = Field(default_factory=list, max_length=MAX_LIST_ITEMS,
                                      description="the people in it")
    key_facts: list[KeyFact] = Field(default_factory=list, max_length=MAX_LIST_ITEMS,
                                     description="stand-alone sentences, each one fact")
    sentiment: Sentiment = Field(default="neutral", description="positive, neutral or negative")
    importance: float = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False,
                              description="0 to 1; important memories decay more slowly")
    pinned: bool = Field(default=False, description="true: never decays or gets archived")
    session_id: ScopeId | None = Field(default=None, description="the conversation it came from")
    persona_id: ScopeId | None = Field(default=None, description="whose memory: one user or assistant persona")
    original_time: str | None = Field(default=None, description="when it happened: ISO-8601 date or "
                                      "date-time (naive = UTC), e.g. 2024-05-08T13:56:00, in the "
                                      f"years {EARLIEST_YEAR} to {LATEST_YEAR}")
    persona_summary: Summary | None = Field(default=None, description="a short profile of the persona "
                                            "as of this memory")

    @field_validator("original_time")
    @classmethod
    def _iso_time(cls, value: str | None) -> str | None:
        if value is not None:
            _storable(value)
            try:
                parse_iso(value, "original_time")
            except InvalidInput:
                raise ValueError("must be an ISO-8601 date or date-time such as "
                                 f"2024-05-08T13:56:00, got {value[:40]!r}") from None
        return value

    def changes(self) -> dict:
        """Only the keys the caller gave, as MemoryFields values (for edits)."""
        return {name: _field_value(name, getattr(self, name)) for name in self.model_fields_set}

    def to_fields(self) -> MemoryFields:
        """Every key, defaults included, as MemoryFields (for new memories)."""
        values: dict[str, Any] = {name: _field_value(name, getattr(self, name)) for name in type(self).model_fields}
        return MemoryFields(**values)


def parse_iso(value: str, name: str) -> datetime:
    """Parse an ISO-8601 date or date-time, or raise InvalidInput naming the argument."""
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{name} must be an ISO-8601 date or date-time, got {value[:40]!r}") from None


def _field_value(name: str, value):
    if name in ("topics", "participants", "key_facts"):
        return tuple(v.strip() for v in value)
    if name == "original_time" and value is not None:
        return parse_iso(value, name)
    return value


# -- results ------------------------------------------------------------------------------


@overload
def _iso_utc(ts: float) -> str: ...
@overload
def _iso_utc(ts: float | None) -> str | None: ...
def _iso_utc(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, timezone.utc).isoformat()


class MemoryOut(BaseModel):
    id: int
    text: str
    topics: list[str]
    participants: list[str]
    key_facts: list[str]
    sentiment: Sentiment
    importance: float
    pinned: bool
    archived: bool
    session_id: str | None
    persona_id: str | None
    original_time: str | None
    persona_summary: str | None
    access_count: int
    last_access_time: str | None
    create_time: str
    update_time: str

    @classmethod
    def of(cls, doc: Document) -> MemoryOut:
        f = doc.fields
        return cls(
            id=doc.id, text=doc.text, topics=list(f.topics), participants=list(f.participants),
            key_facts=list(f.key_facts), importance=f.importance,
            sentiment=cast(Sentiment, f.sentiment),  # stored only after validation as a Sentiment
            pinned=f.pinned, archived=doc.archived, session_id=f.session_id,
            persona_id=f.persona_id,
            original_time=f.original_time.isoformat() if f.original_time else None,
            persona_summary=f.persona_summary, access_count=doc.access_count,
            last_access_time=_iso_utc(doc.last_access_time),
            create_time=_iso_utc(doc.create_time), update_time=_iso_utc(doc.update_time))


class MemorizeResult(BaseModel):
    id: int
    status: Literal["accepted"] = "accepted"
    text: str = Field(description="the stored text, with its original-time marker")
    persona_id: str | None
    session_id: str | None


class SummarizeResult(StructuredMemory):
    """The structured memory; with store=true also memorize's receipt and whether it was new."""

    id: int | None = Field(default=None, description="with store=true: the memory's id")
    status: Literal["accepted", "already stored"] | None = None
    text: str | None = Field(default=None, description="with store=true: the stored text, with its time marker")
    persona_id: str | None = None
    session_id: str | None = None
    stored: bool | None = Field(default=None, description="with store=true: false when this conversation "
                                "was stored before (that memory is returned)")


class RecallHit(BaseModel):
    id: int
    text: str = Field(description="the memory's stored text, with its original-time marker")
    persona_summary: str | None = Field(default=None, description="the memory's persona_summary, when it has one")
    score: float
    importance: float
    pinned: bool
    original_time: str | None
    topics: list[str]
    participants: list[str]
    session_id: str | None
    persona_id: str | None
    explain: dict | None = Field(default=None, description="with explain=true: channels (rank and "
                                 "score in each) and the parts of the score")
    duplicates: list[int] = Field(default_factory=list, description="ids of other memories "
                                  "with the same text, folded into this one")


class RecallResult(BaseModel):
    results: list[RecallHit]


class ListResult(BaseModel):
    memories: list[MemoryOut]
    total: int
    limit: int
    offset: int


class EditResult(BaseModel):
    id: int
    status: Literal["updated"] = "updated"
    memory: MemoryOut


class DeleteResult(BaseModel):
    id: int
    status: Literal["deleted"] = "deleted"
    removed: dict[str, int] = Field(description="rows removed, per table")
    backups_holding: list[str] = Field(
        default_factory=list,
        description="backup files (in the backups folder) that still hold the deleted memory; "
                    "they keep it until they age out (backup.keep_days)")


class PinResult(BaseModel):
    id: int
    pinned: bool


class DocumentCounts(BaseModel):
    total: int
    active: int
    pinned: int
    archived: int


class QueueFigures(BaseModel):
    pending: int
    running: int
    failed: int
    done: int
    oldest_pending_age_s: float
    stuck: int = Field(default=0, description="running stages whose lease ran out")
    retrying: int = Field(default=0, description="pending stages that failed before and back off")


class VectorFigures(BaseModel):
    documents: int = Field(description="live documents with a vector of the configured model")
    graph_entries: int
    model: str
    dim: int
    behind: int = Field(description="live documents still waiting for their vector")
    foreign: int = Field(description="stored vectors of another model or dimension")


class WorkerFigures(BaseModel):
    live: int
    heartbeat_age_s: float | None = Field(description="age of the newest worker heartbeat")


class ModelUsage(BaseModel):
    calls: int
    prompt_tokens: int
    completion_tokens: int
    failures: int


class SummarizerFigures(BaseModel):
    provider: str = Field(description="summarizer.provider: rules or llm")
    model: str | None = Field(description="summarizer.model when the provider is llm")
    usage: dict[str, ModelUsage] = Field(description="tokens spent per model, since the store was made")


class StageProblem(BaseModel):
    memory_id: int
    stage: str
    status: Literal["failed", "stuck"] = Field(description="failed for good, or running past its lease")
    attempts: int
    last_error: str | None = Field(description="the error of its last attempt, one line")
    age_s: float = Field(description="since it failed, or since its lease ran out")


class StatsResult(BaseModel):
    documents: DocumentCounts
    queue: QueueFigures
    vectors: VectorFigures
    workers: WorkerFigures
    summarizer: SummarizerFigures
    tables: dict[str, int]
    database: dict[str, str | int]
    warnings: list[str] = Field(default_factory=list, description="why stages will not get done "
                                "by themselves: no live worker, stuck or failed stages")
    problems: list[StageProblem] = Field(default_factory=list, description="the failed and stuck "
                                         "stages, oldest first (up to 20), each naming its memory and "
                                         "its error; `aokun repair --apply` retries the failed ones")


class AtomOut(BaseModel):
    id: int
    type: AtomType
    text: str
    state: str
    memory_id: int
    score: float = Field(description="relevance to the query times time_factor; 0 for an atom "
                         "listed by type without matching the query")
    confidence: float
    time_factor: float = Field(description="how valid the atom still is, 1 (fully) to 0")
    subject: str | None
    attribute: str | None
    value: str | None
    deadline: str | None
    ttl_days: float | None
    reinforcement_count: int
    persona_id: str | None
    session_id: str | None

    @classmethod
    def of(cls, row: dict, score: float, factor: float) -> AtomOut:
        return cls(id=row["id"], type=row["type"], text=row["text"], state=row["state"],
                   memory_id=row["memory_id"], score=round(score, 6), confidence=row["confidence"],
                   time_factor=round(factor, 6), subject=row["subject"], attribute=row["attribute"],
                   value=row["value"], deadline=_iso_utc(row["deadline"]), ttl_days=row["ttl_days"],
                   reinforcement_count=row["reinforcement_count"], persona_id=row["persona_id"],
                   session_id=row["session_id"])


class AtomsResult(BaseModel):
    atoms: list[AtomOut]


class MaintenanceResult(BaseModel):
    action: MaintenanceAction
    changed: dict = Field(description="per step, what it changed")
