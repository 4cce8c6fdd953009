"""From a conversation to the structured memory that memorize stores.

Two providers behind one call: `rules` (offline, deterministic; the default) and `llm` (any
OpenAI-compatible /chat/completions endpoint, falling back to the rules with a warning when
the model misbehaves). Both return a StructuredMemory, whose fields are valid for memorize as
they are.

Nothing is imported here: `aokun` loads the conversation readers for every command, and the
schema's pydantic only where a summary is made.
"""
