"""FTS5 MATCH expressions built from segmented terms: the only way user text reaches MATCH.

No user text ever reaches MATCH as syntax: every term is a double-quoted FTS5 string (inner
quotes doubled), so quotes, '*', NEAR(...), AND/OR/NOT, '-', 'col:' filters and parentheses
are searched for as words or dropped, never obeyed.
"""

from __future__ import annotations

from typing import Sequence

# A 10 kB query yields thousands of terms; FTS5 cost grows with each, and past a few dozen
# distinct terms the ranking no longer changes in practice.
MAX_QUERY_TERMS = 64


def quote_term(term: str) -> str:
    """One FTS5 string token: the term in double quotes, inner double quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def any_of(terms: Sequence[str]) -> str | None:
    """An OR of quoted terms (the first MAX_QUERY_TERMS), or None when there is nothing."""
    if not terms:
        return None
    return " OR ".join(quote_term(t) for t in list(terms)[:MAX_QUERY_TERMS])
