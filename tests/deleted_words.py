"""What the delete-means-gone tests share (tests/test_delete_gone.py in the test process,
tests/process/test_deleted_words_in_files.py with a real front, worker and backup): a memory
to delete and one to keep, each with words no other term shares (see test_delete_gone's
docstring on how FTS5 stores terms), and readers that look for those words in the database's
files and in the full-text index's segments."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helpers import db_rows
from shared.store.sqlite import fts

DOOMED = "我的邻居养了一只叫饕餮的猫，它最喜欢吃zyxquorblat牌猫粮。"
KEPT = "My colleague Plixomundra fixed the old printer on Monday."
# A term after another on its page shares its leading bytes with it: "zyxquorblat" after a
# z-term is stored as "yxquorblat", and 饕餮 (E9 A5 95 ...) after 邻居 (E9 82 BB) loses its E9.
# No term in these texts shares more than that with either.
NEEDLES = [b"yxquorblat", "饕餮".encode()[1:]]
KEPT_NEEDLE = b"lixomundra"


def fts_blobs_holding(config_or_conn, needle: bytes) -> list[str]:
    """The full-text tables whose index segments (the %_data blobs) contain needle."""
    found = []
    for table in fts.FTS_TABLES:
        sql = f"SELECT block FROM {table}_data"
        rows = (config_or_conn.execute(sql).fetchall() if isinstance(config_or_conn, sqlite3.Connection)
                else db_rows(config_or_conn, sql))
        if any(needle in bytes(r[0]) for r in rows if r[0] is not None):
            found.append(table)
    return found


def files_holding(paths: list[Path], needle: bytes) -> list[str]:
    return [p.name for p in paths if p.exists() and needle in p.read_bytes()]


def db_files(data_dir: Path) -> list[Path]:
    return [data_dir / "aokun.db", data_dir / "aokun.db-wal"]
