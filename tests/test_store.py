"""The SQLite store: migrations, transactions, concurrent writers from several processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from shared.config import AppConfig, StorageConfig, TextConfig
from shared.errors import MemoryNotFound
from shared.store import consistency
from shared.store.db import apply_migrations
from shared.live_config import LiveConfig
from shared.memories import MemoryService
from shared.store.documents import DocumentFilter, MemoryFields, marked_text
from shared.store.schema import MIGRATIONS, open_database
from shared.text.segment import Segmenter
from datetime import datetime


def service(db) -> MemoryService:
    """The memory service without a queue (stages are left to a reconciler)."""
    return MemoryService(db, Segmenter(TextConfig()), None, LiveConfig(AppConfig()), ttl_for=lambda kind, importance, n: 30.0)


@pytest.fixture
def store(tmp_path):
    db = open_database(StorageConfig(data_dir=tmp_path / "data"))
    yield service(db)
    db.close()


def test_schema_is_wal_and_migrations_are_recorded_once(store):
    conn = store.db.connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations")] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert apply_migrations(store.db, MIGRATIONS) == []


def test_failed_transaction_leaves_nothing(store):
    with pytest.raises(RuntimeError):
        with store.db.write() as tx:
            tx.execute("INSERT INTO documents (text, content_hash, create_time, update_time)"
                       " VALUES ('half', 'h', 0, 0)")
            raise RuntimeError("crash between the two inserts")
    assert store.documents.stats()["total"] == 0


def test_time_marker():
    moment = datetime(2024, 5, 8, 13, 56)
    assert marked_text(" hello ", moment) == "[2024-05-08 13:56] hello"
    assert marked_text("hello", datetime(2024, 5, 8)) == "[2024-05-08] hello"
    assert marked_text("[2023-01-01] already marked", moment) == "[2023-01-01] already marked"
    assert marked_text("hello", None) == "hello"


def test_edit_of_original_time_moves_the_marker(store):
    doc = store.memorize("met Alice", MemoryFields(original_time=datetime(2024, 1, 2)))
    assert doc.text == "[2024-01-02] met Alice"
    moved = store.edit(doc.id, None, {"original_time": datetime(2024, 3, 4, 5, 6)})
    assert moved.text == "[2024-03-04 05:06] met Alice"


def test_missing_ids_raise(store):
    with pytest.raises(MemoryNotFound):
        store.documents.get(5)
    with pytest.raises(MemoryNotFound):
        store.edit(5, "x", {})
    with pytest.raises(MemoryNotFound):
        store.delete(5)


def test_archived_documents_leave_search_unless_asked(store):
    doc = store.memorize("archived peanut note", MemoryFields())
    with store.db.write() as tx:
        tx.execute("UPDATE documents SET archived = 1 WHERE id = ?", (doc.id,))
    assert store.documents.bm25(["peanut"], DocumentFilter(), 5) == []
    assert [i for i, _ in store.documents.bm25(["peanut"], DocumentFilter(include_archived=True), 5)] == [doc.id]


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from shared.config import AppConfig, StorageConfig, TextConfig
    from shared.live_config import LiveConfig
    from shared.store.schema import open_database
    from shared.memories import MemoryService
    from shared.store.documents import MemoryFields
    from shared.text.segment import Segmenter
    db = open_database(StorageConfig(data_dir=Path(sys.argv[1]), busy_timeout_ms=30000))
    store = MemoryService(db, Segmenter(TextConfig()), None, LiveConfig(AppConfig()), ttl_for=lambda *a: 30.0)
    for i in range(int(sys.argv[3])):
        store.memorize(f"writer {sys.argv[2]} memory {i} 并发写入", MemoryFields(persona_id=sys.argv[2]))
""")


@pytest.mark.slow
def test_concurrent_writers_in_separate_processes(tmp_path):
    data = tmp_path / "data"
    open_database(StorageConfig(data_dir=data)).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(data), name, "150"],
                              stderr=subprocess.PIPE, text=True) for name in ("a", "b", "c")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    db = open_database(StorageConfig(data_dir=data))
    store = service(db).documents
    assert store.stats()["total"] == 450
    assert consistency.all_table_counts(db)["documents_fts"] == 450
    for name in ("a", "b", "c"):
        assert store.list(1, 0, DocumentFilter(persona_id=name))[1] == 150
    assert db.connection().execute("PRAGMA integrity_check").fetchone()[0] == "ok"


OPENER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from shared.config import StorageConfig
    from shared.store.schema import open_database
    db = open_database(StorageConfig(data_dir=Path(sys.argv[1])))
    db.connection().execute("SELECT COUNT(*) FROM documents").fetchone()
""")


@pytest.mark.slow
def test_processes_creating_one_database_at_once(tmp_path):
    # Switching a fresh database to WAL does not wait on busy_timeout; opening must retry.
    for attempt in range(4):
        data = tmp_path / f"fresh{attempt}"
        procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(data)], stderr=subprocess.PIPE,
                                  text=True) for _ in range(4)]
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
