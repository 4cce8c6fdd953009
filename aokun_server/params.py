"""The tools' parameters: each a type with its limits and the one-line description a model
reads in the tool's input schema.

The limits a schema shows are the ones enforced. k's maximum is live config
(memory.recall_max_k): the schema shows the value at start, and each call checks the value
the running server has then (k_param). 64-bit bounds on ids and offsets are checked but not
advertised: `maximum: 9223372036854775807` tells a model nothing.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from shared.api.models import MAX_INT64, MAX_LIST_LIMIT, MemoryMetadata, ScopeId
from shared.config import SummarizerProvider
from shared.lifecycle import MaintenanceAction
from shared.live_config import LiveConfig
from shared.store.model.atoms import AtomType

MIN_ANSWER_CHARS = 100  # room for the sentence an empty answer is
MAX_ANSWER_CHARS = 1_000_000


def _int64(value: int) -> int:
    if value > MAX_INT64:
        raise ValueError(f"must be at most {MAX_INT64} (got {value})")
    return value


def k_param(live: LiveConfig):
    """k for recall and search_atoms: 1 to memory.recall_max_k as the server reads it at the
    call (a k above it is refused, never capped); the schema shows the value at registration."""
    schema_max = live.now.memory.recall_max_k

    def within(k: int | None) -> int | None:
        top = live.now.memory.recall_max_k
        if k is not None and not 1 <= k <= top:
            raise ValueError(f"must be between 1 and {top} (got {k})")
        return k

    return Annotated[int | None, Field(
        strict=True, json_schema_extra={"minimum": 1, "maximum": schema_max},
        description=f"how many results, 1 to {schema_max} (memory.recall_max_k; the running "
                    "server's value rules); a larger k is refused"), AfterValidator(within)]


MemoryId = Annotated[int, Field(strict=True, ge=1, description="a memory's id, as memorize, "
                                "recall or list_memories gave it"), AfterValidator(_int64)]
Offset = Annotated[int, Field(strict=True, ge=0, description="how many memories to skip, "
                              "for paging"), AfterValidator(_int64)]
ListLimit = Annotated[int, Field(strict=True, ge=1, le=MAX_LIST_LIMIT,
                                 description="how many memories to return")]

Content = Annotated[str, Field(description="the text to remember, in the user's own words and language")]
NewContent = Annotated[str | None, Field(
    description="the memory's new text (replaces the old one); leave out to keep it")]
Metadata = Annotated[MemoryMetadata, Field(description="optional facts about the memory; "
                                           "unknown keys are refused")]
MetadataChanges = Annotated[MemoryMetadata | None, Field(
    description="the metadata keys to change; the others keep their values")]
Query = Annotated[str, Field(description="what to look for, in the user's words")]
AtomQuery = Annotated[str | None, Field(description="what to look for; leave out to list the given types")]
PersonaFilter = Annotated[str | None, Field(
    description="whose memories: one user or assistant persona (exact persona_id); leave out for every persona")]
SessionFilter = Annotated[str | None, Field(
    description="one conversation (exact session_id); leave out for every conversation")]
Since = Annotated[str | None, Field(
    description="only memories that happened at or after this: an ISO-8601 date or date-time (naive = UTC), e.g. "
                "2024-05-08 or 2024-05-08T13:56:00")]
Until = Annotated[str | None, Field(
    description="only memories that happened at or before this: an ISO-8601 date or date-time (naive = UTC)")]
HappensAfter = Annotated[str | None, Field(
    description="only memories of what happens at or after this — a plan's date, an event's date — not when it "
                "was told: an ISO-8601 date or date-time (naive = UTC), e.g. 2024-05-13")]
HappensBefore = Annotated[str | None, Field(
    description="only memories of what happens before this (a date: up to the end of that day): an ISO-8601 date "
                "or date-time (naive = UTC)")]
IncludeArchived = Annotated[bool, Field(
    strict=True, description="also search archived memories (old, unimportant ones left out by default)")]
Explain = Annotated[bool, Field(
    strict=True, description="add, per result, the channels that found it and the parts of its score")]
MinScore = Annotated[float | None, Field(
    strict=True, ge=0.0, le=1.0, allow_inf_nan=False,
    description="leave out results scoring below this, 0 to 1 (a score is the probability that a "
                "memory is relevant); without it, retrieval.min_score, and nothing at all when the "
                "store likely holds no answer (retrieval.min_answerable)")]
MaxChars = Annotated[int | None, Field(
    strict=True, ge=MIN_ANSWER_CHARS, le=MAX_ANSWER_CHARS,
    description="a character budget for the text answer: the best results whose lines fit, "
                "whole")]
AtomTypes = Annotated[list[AtomType] | None, Field(
    description="kinds of atom to return (and, without a query, to list): episodic, planned, factual, "
                "relational, preference, unknown")]
Pinned = Annotated[bool, Field(strict=True, description="true to pin (never decays or gets archived), false to unpin")]
Action = Annotated[MaintenanceAction, Field(description="which upkeep to run: decay, archive, "
                                            "atoms, backup, reconcile, or all")]
PersonaOf = Annotated[ScopeId | None, Field(description="whose conversation: one user or "
                                            "assistant persona, stored as the memory's persona_id")]
SessionOf = Annotated[ScopeId | None, Field(description="the conversation's session_id, stored "
                                            "with the memory")]
Store = Annotated[bool, Field(
    strict=True, description="also memorize the summary and return the receipt (a conversation stored "
                             "before stays one memory)")]
Provider = Annotated[SummarizerProvider | None, Field(
    description="rules (offline) or llm (the configured model); default summarizer.provider")]
