"""Full-text search terms both engines share: how many terms a query keeps, the full-text
indexes a delete scrubs by name, and the tokens that mark a row's persona and session."""

from __future__ import annotations

import hashlib

# A 10 kB query yields thousands of terms; FTS5 cost grows with each, and past a few dozen
# distinct terms the ranking no longer changes in practice.
MAX_QUERY_TERMS = 64


def scope_token(kind: str, value: str) -> str:
    """The token that marks a row's persona ("p") or session ("s") in an FTS5 scope column: a
    letter pair and decimal digits from a hash of the id, which no tokenizer or stemmer
    changes and no word of text can equal."""
    digest = int.from_bytes(hashlib.sha1(value.encode("utf-8")).digest()[:8], "big")
    return f"z{kind}{digest}"


def scope_tokens(persona_id: str | None, session_id: str | None) -> str:
    """What a row's scope column holds."""
    parts = [scope_token("p", persona_id)] if persona_id is not None else []
    if session_id is not None:
        parts.append(scope_token("s", session_id))
    return " ".join(parts)


# The full-text indexes a delete scrubs by name (SQLite's FTS5 tables; PostgreSQL keeps its own
# index under the same names).
FTS_TABLES = ("documents_fts", "atoms_fts", "graph_entries_fts")
