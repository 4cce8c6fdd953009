"""From a conversation to the structured memory that memorize stores.

Two providers behind one call: `rules` (offline, deterministic; the default) and `llm` (any
OpenAI-compatible /chat/completions endpoint, falling back to the rules with a warning when
the model misbehaves). Both return a StructuredMemory, whose fields are valid for memorize as
they are.
"""

from __future__ import annotations

from shared.summarize.conversation import Turn, parse_conversation
from shared.summarize.schema import StructuredMemory

__all__ = ["StructuredMemory", "Turn", "parse_conversation"]
