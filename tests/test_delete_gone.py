"""Delete means gone: after a delete, no word of the deleted memory is readable in the database
file, its WAL, or a backup taken afterwards (tests/process/test_deleted_words_in_files.py: the
same through a real front, worker and `aokun backup`).

FTS5 keeps terms stemmed (porter) and prefix-compressed (a term stores only what differs from
the previous term on its page), so each rare word is chosen to stem to itself, the needle is
the part no neighbouring term shares, and every test first checks that the needle really is
in the full-text index's segments before the delete (so a needle that FTS5 never stores
cannot make a test pass).
"""

from __future__ import annotations

import importlib.util
import sqlite3
import threading
import time

import pytest

from deleted_words import DOOMED, KEPT, KEPT_NEEDLE, NEEDLES, db_files, files_holding, fts_blobs_holding
from helpers import db_rows, write_config
from shared.config import StorageConfig, TextConfig
from shared.errors import StorageError
from shared.store.sqlite import fts
from shared.store.sqlite.backup import backup_database
from shared.store.sqlite.schema import open_database
from shared.text.segment import Segmenter

# Rows around the doomed and kept ones; no term here shares more than a leading byte or letter
# with a needle (deleted_words.NEEDLES).
FILLER = ["the zoo keeper fed the zebras at noon", "我们周末去公园散步，天气很好",
          "zany plans for the summer trip", "昨天下雨了，我在家看书"]


# -- store level: the SQLite engine's own functions (shared/store/fts.py) on a real Database ---


@pytest.fixture
def store(tmp_path):
    """A real database whose three full-text tables hold filler, one doomed and one kept row."""
    db = open_database(StorageConfig(data_dir=tmp_path / "data"))
    fts.configure_connection(db.connection())
    segmenter = Segmenter(TextConfig())
    # Several transactions: several segments, on several levels, as in a store in use.
    for batch in range(6):
        with db.write() as tx:
            for i in range(200):
                rowid = batch * 1000 + i + 1
                tokens = " ".join(segmenter.terms(f"{FILLER[i % 4]} {rowid}"))
                for table in fts.FTS_TABLES:
                    tx.execute(f"INSERT INTO {table} (rowid, tokens) VALUES (?, ?)", (rowid, tokens))
            if batch == 2:
                for rowid, text in ((900, DOOMED), (901, KEPT)):
                    for table in fts.FTS_TABLES:
                        tx.execute(f"INSERT INTO {table} (rowid, tokens) VALUES (?, ?)",
                                   (rowid, " ".join(segmenter.terms(text))))
    conn = db.connection()
    for needle in NEEDLES:
        assert fts_blobs_holding(conn, needle) == list(fts.FTS_TABLES), needle
    yield db, tmp_path / "data"
    db.close()


def delete_doomed(db, scrub: bool) -> None:
    with db.write() as tx:
        for table in fts.FTS_TABLES:
            tx.execute(f"DELETE FROM {table} WHERE rowid = 900")
        if scrub:
            fts.scrub_terms(tx, fts.FTS_TABLES)


def test_without_scrubbing_the_index_keeps_the_words(store):
    """The problem itself, and proof that the needles are found where FTS5 leaves them."""
    db, _ = store
    delete_doomed(db, scrub=False)
    for needle in NEEDLES:
        assert fts_blobs_holding(db.connection(), needle) == list(fts.FTS_TABLES)


def test_scrubbed_delete_leaves_no_word_in_files_or_backup(store, tmp_path):
    db, data_dir = store
    delete_doomed(db, scrub=True)
    assert fts.flush_deleted(db.connection()) is True
    backup = backup_database(db, tmp_path / "backups", time.time(), "test")
    for needle in NEEDLES:
        assert fts_blobs_holding(db.connection(), needle) == []
        assert files_holding([*db_files(data_dir), backup], needle) == [], repr(needle)
    assert (data_dir / "aokun.db-wal").stat().st_size == 0
    assert KEPT_NEEDLE in backup.read_bytes()
    conn = db.connection()
    for table in fts.FTS_TABLES:
        conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
        match = f"SELECT rowid FROM {table} WHERE {table} MATCH ?"
        assert [r[0] for r in conn.execute(match, ("plixomundra",))] == [901]
        assert [r[0] for r in conn.execute(match, ("zyxquorblat",))] == []
        assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {table} MATCH 'zebra'").fetchone()[0] > 0


def test_flush_with_a_reader_settles_for_less_and_the_next_flush_completes(store):
    """The delete is not held up by a reader: the flush waits its own short wait_ms, not the
    connection's busy_timeout, and returns while the reader still holds its snapshot."""
    db, data_dir = store
    reader = sqlite3.connect(data_dir / "aokun.db", isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM documents_fts").fetchone()  # holds a snapshot
        delete_doomed(db, scrub=True)
        conn = db.connection()
        configured = conn.execute("PRAGMA busy_timeout").fetchone()[0]
        conn.execute("PRAGMA busy_timeout = 3600000")  # an hour: a flush waiting on it never returns
        outcome = {}
        flush = threading.Thread(target=lambda: outcome.update(flushed=fts.flush_deleted(conn)))
        flush.start()
        flush.join(60)
        assert "flushed" in outcome, "flush_deleted still waiting for the reader after 60 s"
        assert outcome["flushed"] is False
        assert reader.in_transaction  # returned while the reader still reads its old snapshot
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 3600000  # left as it was
        conn.execute(f"PRAGMA busy_timeout = {configured}")
        reader.execute("COMMIT")
    finally:
        reader.close()
    assert fts.flush_deleted(db.connection()) is True
    for needle in NEEDLES:
        assert files_holding(db_files(data_dir), needle) == [], repr(needle)


def test_a_connection_that_does_not_zero_deletes_refuses_and_deletes_nothing(store):
    db, _ = store
    db.connection().execute("PRAGMA secure_delete = OFF")
    with pytest.raises(StorageError, match="secure_delete"):
        delete_doomed(db, scrub=True)
    assert db.connection().execute("SELECT COUNT(*) FROM documents_fts WHERE rowid = 900").fetchone()[0] == 1


@pytest.mark.skipif(importlib.util.find_spec("pysqlite3") is None,
                    reason="needs pysqlite3 (a bundled SQLite >= 3.44) for FTS5 'secure-delete'")
def test_in_place_secure_delete_on_a_newer_sqlite(tmp_path):
    from pysqlite3 import dbapi2

    path = tmp_path / "new.db"
    first, second = (dbapi2.connect(path, isolation_level=None) for _ in range(2))
    for conn in (first, second):
        conn.execute("PRAGMA journal_mode = WAL")
        fts.configure_connection(conn)
    assert fts.library_version(first) >= fts.IN_PLACE_FROM
    first.execute("CREATE VIRTUAL TABLE documents_fts USING fts5(tokens)")
    first.executemany("INSERT INTO documents_fts (rowid, tokens) VALUES (?, ?)",
                      [(i, f"{FILLER[i % 4]} {i}") for i in range(1, 2000)]
                      + [(5000, "zyxquorblat one"), (5001, "qwompelstrix two")])
    for conn, rowid in ((first, 5000), (second, 5001)):  # the second relies on the persisted option
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (rowid,))
        if conn is first:
            fts.scrub_terms(conn, ["documents_fts"])
        conn.execute("COMMIT")
        assert fts.flush_deleted(conn) is True
    data = path.read_bytes()
    assert b"yxquorblat" not in data and b"wompelstrix" not in data
    first.execute("INSERT INTO documents_fts (documents_fts) VALUES ('integrity-check')")


def test_an_edit_drops_the_old_words_by_the_next_upkeep(tmp_path):
    """On SQLite >= 3.44 an edit scrubs at once; on older ones a rewrite per edit would cost
    ~0.5 s at 100k memories, so the worker's hourly housekeeping does it."""
    from aokun_worker.service import WorkerService
    from shared.assembly import open_services
    from shared.config import load_config
    from shared.store.model.documents import MemoryFields

    config_path = write_config(tmp_path)
    config = load_config(config_path)
    services = open_services(config, queued=False)
    memories = services.memories
    doc = memories.memorize(DOOMED, MemoryFields())
    memories.memorize(KEPT, MemoryFields())
    memories.edit(doc.id, "我的邻居养了一只猫。", {})
    data_dir = config.storage.data_dir
    if not services.store.fts.scrubs_in_place():
        assert fts_blobs_holding(config_path, NEEDLES[0]) == ["documents_fts"]
        service = WorkerService(services)
        assert "scrubbed" in service.housekeeping_job(None, time.time())
    for needle in NEEDLES:
        assert fts_blobs_holding(config_path, needle) == []
        assert files_holding(db_files(data_dir), needle) == []
    assert KEPT_NEEDLE in b"".join(bytes(r[0]) for r in db_rows(
        config_path, "SELECT block FROM documents_fts_data") if r[0] is not None)
    services.close()
