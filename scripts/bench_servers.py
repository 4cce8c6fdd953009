"""The PostgreSQL database a benchmark runs on (--backend postgresql): made on the server at
--pg (default: the local development server), kept when the run has a --work folder (its
name is written there, so a later run reuses it), else dropped at the end."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432"


def _admin(server: str):
    import psycopg

    return psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=5)


@contextmanager
def bench_database(server: str, work: Path | None) -> Iterator[str]:
    """The URL of this run's database."""
    named = work / "postgres-database.txt" if work is not None else None
    if named is not None and named.exists():
        yield f"{server}/{named.read_text().strip()}"
        return
    name = f"aokun_bench_{uuid.uuid4().hex[:12]}"
    with _admin(server) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    if named is not None:
        named.write_text(name)
    try:
        yield f"{server}/{name}"
    finally:
        if named is None:
            with _admin(server) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_sql(url: str, statements: list[tuple[str, tuple]]) -> None:
    """Statements (with %s placeholders) in one transaction on the database."""
    import psycopg

    with psycopg.connect(url) as conn:
        for sql, params in statements:
            conn.execute(sql, params)
