"""One flat error hierarchy: storage and services raise these, the tool layer translates."""


class AokunError(Exception):
    """Base class of every error Aokun raises on purpose."""


class ConfigError(AokunError):
    """The configuration file or a value in it is invalid."""


class InvalidInput(AokunError):
    """An argument from a caller is malformed; the message names the argument and the rule."""


class MemoryNotFound(AokunError):
    """No live memory has the requested id."""

    def __init__(self, memory_id: int):
        super().__init__(f"no memory with id {memory_id}")
        self.memory_id = memory_id


class AccessDenied(AokunError):
    """The caller's token does not cover what it asked for (shared/access.py says the rules)."""


class StorageError(AokunError):
    """The database could not complete an operation (locked, corrupt, disk full...).

    `kind` lets callers decide without reading the message: "full", "read_only", "locked",
    "corrupt", "cannot_open", "io" or "other"."""

    def __init__(self, message: str, kind: str = "other"):
        super().__init__(message)
        self.kind = kind


class SummarizerError(AokunError):
    """The llm summarizer gave no usable memory (unreachable, refused, timed out, invalid twice)."""


class EmbeddingError(AokunError):
    """The embedder failed or answered something unusable (wrong dimension, bad reply)."""
