"""The structured memory a summarizer returns: validated by this one model, whether it came
from the rules, from a model's JSON, or back to a caller of summarize_memory."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from shared.config import SummarizerProvider

# memorize's limits, so a summary is always storable.
from shared.store.model.documents import (
    MAX_KEY_FACT_CHARS,
    MAX_LABEL_CHARS,
    MAX_LIST_ITEMS,
    MAX_SUMMARY_CHARS,
    Sentiment,
)


class StructuredMemory(BaseModel):
    """summary, topics, participants, key_facts, sentiment, importance, persona_summary — each
    valid for memorize as it is — plus which provider made it and any warnings."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1, max_length=20_000,
                         description="the key facts in order, within the length budget")
    topics: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    participants: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    key_facts: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS,
                                 description="stand-alone sentences, the speaker as subject, dates resolved")
    sentiment: Sentiment = "neutral"
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    persona_summary: str | None = Field(default=None, max_length=MAX_SUMMARY_CHARS)
    provider: SummarizerProvider = "rules"
    warnings: list[str] = Field(default_factory=list)

    def trimmed(self) -> StructuredMemory:
        """Items cut to memorize's limits (a model may write longer ones)."""
        def cut(items: list[str], chars: int) -> list[str]:
            kept = [i.strip()[:chars] for i in items if i and i.strip()]
            return list(dict.fromkeys(kept))[:MAX_LIST_ITEMS]
        return self.model_copy(update={
            "topics": cut(self.topics, MAX_LABEL_CHARS), "participants": cut(self.participants, MAX_LABEL_CHARS),
            "key_facts": cut(self.key_facts, MAX_KEY_FACT_CHARS)})


# What the llm provider asks the model for: the memory's fields without provider/warnings.
MODEL_FIELDS = ("summary", "topics", "participants", "key_facts", "sentiment", "importance", "persona_summary")
