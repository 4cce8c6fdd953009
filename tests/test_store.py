"""The SQLite store: migrations, transactions, concurrent writers from several processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import datetime

import pytest

from helpers import store_sql
from shared.assembly import open_services
from shared.config import AppConfig, StorageConfig
from shared.errors import MemoryNotFound
from shared.store import open_store
from shared.store.model.documents import DocumentFilter, MemoryFields, marked_text
from shared.store.sqlite.db import Database, apply_migrations
from shared.store.sqlite.schema import MIGRATIONS


@pytest.fixture
def service(tmp_path):
    """The memory service without a queue (stages are left to a reconciler)."""
    services = open_services(AppConfig(storage=StorageConfig(data_dir=tmp_path / "data")), queued=False)
    yield services.memories
    services.close()


def test_schema_is_wal_and_migrations_are_recorded_once(service):
    assert store_sql(service.store, "PRAGMA journal_mode")[0][0] == "wal"
    recorded = [r[0] for r in store_sql(service.store, "SELECT version FROM schema_migrations")]
    assert recorded == list(range(1, len(MIGRATIONS) + 1))
    # The SQLite engine's own migrations, run again on the file: nothing left to apply.
    assert apply_migrations(Database(service.store.location), MIGRATIONS) == []


def test_failed_transaction_leaves_nothing(service):
    with pytest.raises(RuntimeError):
        with service.store.write() as tx:
            tx.documents.insert("half", "half", MemoryFields(), 0.0)
            raise RuntimeError("crash between the two inserts")
    assert service.store.documents.stats()["total"] == 0


def test_time_marker():
    moment = datetime(2024, 5, 8, 13, 56)
    assert marked_text(" hello ", moment) == "[2024-05-08 13:56] hello"
    assert marked_text("hello", datetime(2024, 5, 8)) == "[2024-05-08] hello"
    assert marked_text("[2023-01-01] already marked", moment) == "[2023-01-01] already marked"
    assert marked_text("hello", None) == "hello"


def test_edit_of_original_time_moves_the_marker(service):
    doc = service.memorize("met Alice", MemoryFields(original_time=datetime(2024, 1, 2)))
    assert doc.text == "[2024-01-02] met Alice"
    moved = service.edit(doc.id, None, {"original_time": datetime(2024, 3, 4, 5, 6)})
    assert moved.text == "[2024-03-04 05:06] met Alice"


def test_missing_ids_raise(service):
    with pytest.raises(MemoryNotFound):
        service.store.documents.get(5)
    with pytest.raises(MemoryNotFound):
        service.edit(5, "x", {})
    with pytest.raises(MemoryNotFound):
        service.delete(5)


def test_archived_documents_leave_search_unless_asked(service):
    doc = service.memorize("archived peanut note", MemoryFields())
    store_sql(service.store, "UPDATE documents SET archived = 1 WHERE id = ?", (doc.id,))
    assert service.store.documents.bm25(["peanut"], DocumentFilter(), 5) == []
    found = service.store.documents.bm25(["peanut"], DocumentFilter(include_archived=True), 5)
    assert [i for i, _ in found] == [doc.id]


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from shared.assembly import open_services
    from shared.config import AppConfig, StorageConfig
    from shared.store.model.documents import MemoryFields
    services = open_services(AppConfig(storage=StorageConfig(data_dir=Path(sys.argv[1]), busy_timeout_ms=30000)),
                             queued=False)
    for i in range(int(sys.argv[3])):
        services.memories.memorize(f"writer {sys.argv[2]} memory {i} 并发写入", MemoryFields(persona_id=sys.argv[2]))
""")


@pytest.mark.slow
def test_concurrent_writers_in_separate_processes(tmp_path):
    data = tmp_path / "data"
    open_store(StorageConfig(data_dir=data)).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(data), name, "150"],
                              stderr=subprocess.PIPE, text=True) for name in ("a", "b", "c")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    store = open_store(StorageConfig(data_dir=data))
    assert store.documents.stats()["total"] == 450
    assert store.consistency.table_counts()["documents_fts"] == 450
    for name in ("a", "b", "c"):
        assert store.documents.list(1, 0, DocumentFilter(persona_id=name))[1] == 150
    assert store_sql(store, "PRAGMA integrity_check")[0][0] == "ok"
    store.close()


OPENER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from shared.config import StorageConfig
    from shared.store import open_store
    store = open_store(StorageConfig(data_dir=Path(sys.argv[1])))
    store.documents.count()
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
