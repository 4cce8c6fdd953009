"""FTS5 MATCH expressions built from segmented terms: the only way user text reaches MATCH.

No user text ever reaches MATCH as syntax: every term is a double-quoted FTS5 string (inner
quotes doubled), so quotes, '*', NEAR(...), AND/OR/NOT, '-', 'col:' filters and parentheses
are searched for as words or dropped, never obeyed.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.store.model.fulltext import MAX_QUERY_TERMS, scope_tokens


def quote_term(term: str) -> str:
    """One FTS5 string token: the term in double quotes, inner double quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def any_of(terms: Sequence[str]) -> str | None:
    """An OR of quoted terms (the first MAX_QUERY_TERMS), or None when there is nothing."""
    if not terms:
        return None
    return " OR ".join(quote_term(t) for t in list(terms)[:MAX_QUERY_TERMS])


def scoped(match: str | None, column: str, persona_id: str | None, session_id: str | None) -> str | None:
    """match restricted to rows of a persona and/or session through the scope column, so FTS5
    ranks only those rows instead of every row that holds a term."""
    if match is None:
        return None
    tokens = scope_tokens(persona_id, session_id).split()
    if not tokens:
        return match
    return " AND ".join([f"{column} : {t}" for t in tokens] + [f"({match})"])
