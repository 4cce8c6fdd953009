"""The schema as frozen, literal migrations.

A migration is never rebuilt from the modules' current lists: what version N created on a
store in the field is exactly the text below, forever. A change is a new migration.
"""

from __future__ import annotations

from shared.config import StorageConfig
from shared.store.model.migration import Migration
from shared.store.sqlite.db import Database, apply_migrations
from shared.store.sqlite.initial_schema import INITIAL_SCHEMA

MIGRATIONS = [
    Migration(1, "initial schema", INITIAL_SCHEMA),
    # Before this version the atoms and graph stages ran without extractors: run them again.
    Migration(2, "rule-based atoms and graph", [
        "UPDATE memory_stages SET status = 'pending', attempts = 0, next_attempt_time = NULL,"
        " enqueued_time = NULL, lease_owner = NULL, lease_until = NULL, last_error = NULL"
        " WHERE stage IN ('atoms', 'graph')",
    ]),
    # Fronts beat like workers (so an autostarted worker knows when it is no longer needed);
    # a worker row says whether a front started it, and when it is winding down.
    Migration(3, "front heartbeats; autostarted and stopping workers", [
        """
        CREATE TABLE fronts (
            front_id TEXT PRIMARY KEY,
            pid INTEGER NOT NULL,
            hostname TEXT NOT NULL,
            transport TEXT NOT NULL,
            started_time REAL NOT NULL,
            heartbeat_time REAL NOT NULL
        ) WITHOUT ROWID
        """,
        "ALTER TABLE workers ADD COLUMN autostarted INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE workers ADD COLUMN stopping INTEGER NOT NULL DEFAULT 0",
    ]),
    # Nodes keyed on (type, canonical form) with the written forms kept; entries remember the
    # atom they come from. Old graph output is keyed differently: drop it (the entry vectors
    # too, raising the tombstone floor so every front rebuilds its index) and build it again
    # from the stored atoms.
    Migration(4, "canonical graph nodes, entries by atom", [
        "ALTER TABLE graph_nodes ADD COLUMN forms TEXT NOT NULL DEFAULT '[]'",
        "ALTER TABLE graph_entries ADD COLUMN atom_id INTEGER",
        "CREATE INDEX graph_entries_atom ON graph_entries (atom_id)",
        "DELETE FROM graph_entries_fts",
        "DELETE FROM graph_entries",
        "DELETE FROM graph_edges",
        "DELETE FROM graph_nodes",
        "DELETE FROM vectors WHERE kind = 'graph_entry'",
        "INSERT INTO meta (key, value) VALUES ('vector_seq', 1)"
        " ON CONFLICT (key) DO UPDATE SET value = value + 1",
        "INSERT INTO meta (key, value) SELECT 'vector_tombstone_floor', value FROM meta"
        " WHERE key = 'vector_seq' ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        "UPDATE memory_stages SET status = 'pending', attempts = 0, next_attempt_time = NULL,"
        " enqueued_time = NULL, lease_owner = NULL, lease_until = NULL, last_error = NULL"
        " WHERE stage = 'graph'",
    ]),
    # The panel's overview counts vectors per space and atoms per type and state: without these
    # indexes both are full scans with a temporary B-tree.
    Migration(5, "indexes for the panel's counts", [
        "CREATE INDEX vectors_space ON vectors (kind, model, dim)",
        "CREATE INDEX memory_atoms_type_state ON memory_atoms (type, state)",
    ]),
    # Summarization: tokens spent per model, and the hash of the source a memory was made from
    # (a transcript ingested twice, an import run again: one memory).
    Migration(6, "summarizer usage, memory sources", [
        """
        CREATE TABLE llm_usage (
            model TEXT PRIMARY KEY,
            calls INTEGER NOT NULL DEFAULT 0,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            failures INTEGER NOT NULL DEFAULT 0,
            last_time REAL
        ) WITHOUT ROWID
        """,
        "ALTER TABLE documents ADD COLUMN source_hash TEXT",
        "CREATE INDEX documents_source_hash ON documents (source_hash)",
    ]),
    # Conversation context: a memory is indexed with the memories just before it in its
    # conversation (shared/store/portable/neighbours.py). The BM25 table gains a context column, so it
    # is made again; every front and worker back-fills the rows at start (backfill_fts).
    Migration(7, "conversation context", [
        """
        CREATE TABLE memory_context (
            memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            neighbour_id INTEGER NOT NULL,
            position INTEGER NOT NULL,
            PRIMARY KEY (memory_id, neighbour_id)
        ) WITHOUT ROWID
        """,
        "CREATE INDEX memory_context_neighbour ON memory_context (neighbour_id)",
        "DROP TABLE documents_fts",
        "CREATE VIRTUAL TABLE documents_fts USING fts5(tokens, context,"
        " tokenize = 'porter unicode61 remove_diacritics 2')",
    ]),
    # BM25 ranks only the recall's persona / session: a scope column of tokens that mark them
    # (shared/store/sqlite/match.py); without it FTS5 scores every row holding a query term, in
    # every persona. Made again and back-filled like migration 7.
    Migration(8, "scoped BM25 rows", [
        "DROP TABLE documents_fts",
        "CREATE VIRTUAL TABLE documents_fts USING fts5(tokens, context, scope,"
        " tokenize = 'porter unicode61 remove_diacritics 2')",
    ]),
    # Typed entities (person, place, organisation, other; one self node per persona) and typed
    # relations between them ("relation" edges, the relation in its own column), with atom
    # rules that type everyday text better. The graph tables are made again (their type checks
    # change) and every memory's atoms and graph are made again from its text; the entry
    # vectors go too, raising the tombstone floor so every front rebuilds its index.
    Migration(9, "typed entities and relations", [
        "DELETE FROM graph_entries_fts",
        "DROP TABLE graph_entries",
        "DROP TABLE graph_edges",
        "DROP TABLE graph_nodes",
        """
        CREATE TABLE graph_nodes (
            id INTEGER PRIMARY KEY,
            persona_id TEXT NOT NULL DEFAULT '',
            key TEXT NOT NULL,
            type TEXT NOT NULL CHECK (type IN ('person', 'place', 'organisation', 'other', 'topic', 'fact')),
            value TEXT NOT NULL,
            canonical TEXT NOT NULL,
            create_time REAL NOT NULL,
            forms TEXT NOT NULL DEFAULT '[]',
            UNIQUE (persona_id, key)
        )
        """,
        "CREATE INDEX graph_nodes_canonical ON graph_nodes (canonical)",
        """
        CREATE TABLE graph_edges (
            id INTEGER PRIMARY KEY,
            source_memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            src_node_id INTEGER NOT NULL REFERENCES graph_nodes(id) ON DELETE CASCADE,
            dst_node_id INTEGER NOT NULL REFERENCES graph_nodes(id) ON DELETE CASCADE,
            type TEXT NOT NULL CHECK (type IN ('describes', 'mentioned_in', 'co_occurs_with', 'relation')),
            confidence REAL NOT NULL DEFAULT 0.0,
            weight REAL NOT NULL DEFAULT 1.0,
            create_time REAL NOT NULL,
            relation TEXT CHECK ((type = 'relation') = (relation IS NOT NULL))
        )
        """,
        "CREATE INDEX graph_edges_src ON graph_edges (src_node_id, confidence DESC, source_memory_id DESC)",
        "CREATE INDEX graph_edges_dst ON graph_edges (dst_node_id, confidence DESC, source_memory_id DESC)",
        "CREATE INDEX graph_edges_src_weight ON graph_edges (src_node_id, weight DESC, dst_node_id)",
        "CREATE INDEX graph_edges_dst_weight ON graph_edges (dst_node_id, weight DESC, src_node_id)",
        "CREATE INDEX graph_edges_memory ON graph_edges (source_memory_id)",
        "CREATE INDEX graph_edges_relation_src ON graph_edges (src_node_id, relation) WHERE relation IS NOT NULL",
        "CREATE INDEX graph_edges_relation_dst ON graph_edges (dst_node_id, relation) WHERE relation IS NOT NULL",
        """
        CREATE TABLE graph_entries (
            id INTEGER PRIMARY KEY,
            source_memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            node_id INTEGER REFERENCES graph_nodes(id) ON DELETE SET NULL,
            persona_id TEXT,
            text TEXT NOT NULL,
            confidence REAL NOT NULL DEFAULT 0.0,
            content_hash TEXT,
            create_time REAL NOT NULL,
            atom_id INTEGER
        )
        """,
        "CREATE INDEX graph_entries_memory ON graph_entries (source_memory_id)",
        "CREATE INDEX graph_entries_node ON graph_entries (node_id, confidence DESC, source_memory_id DESC)",
        "CREATE INDEX graph_entries_atom ON graph_entries (atom_id)",
        "DELETE FROM vectors WHERE kind = 'graph_entry'",
        "INSERT INTO meta (key, value) VALUES ('vector_seq', 1)"
        " ON CONFLICT (key) DO UPDATE SET value = value + 1",
        "INSERT INTO meta (key, value) SELECT 'vector_tombstone_floor', value FROM meta"
        " WHERE key = 'vector_seq' ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        "UPDATE memory_stages SET status = 'pending', attempts = 0, next_attempt_time = NULL,"
        " enqueued_time = NULL, lease_owner = NULL, lease_until = NULL, last_error = NULL"
        " WHERE stage IN ('atoms', 'graph')",
    ]),
    # A periodic run is claimed here and recorded in periodic_runs only when it finished; a
    # claim whose process died (or whose lease passed) is taken over.
    Migration(10, "periodic claims", [
        """
        CREATE TABLE periodic_claims (
            name TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            pid INTEGER NOT NULL,
            hostname TEXT NOT NULL,
            claimed_time REAL NOT NULL,
            lease_until REAL NOT NULL
        ) WITHOUT ROWID
        """,
    ]),
    # Users: each a token (kept only as its SHA-256) allowed to read and write its personas,
    # or every persona when admin (shared/access.py). A revoked user keeps its row, with the
    # time, so `aokun users list` shows it; its token is refused from that commit on.
    Migration(11, "users", [
        """
        CREATE TABLE users (
            name TEXT PRIMARY KEY,
            token_hash TEXT NOT NULL UNIQUE,
            personas TEXT NOT NULL DEFAULT '[]',
            admin INTEGER NOT NULL DEFAULT 0 CHECK (admin IN (0, 1)),
            create_time REAL NOT NULL,
            revoke_time REAL
        )
        """,
    ]),
    # A front's row says where it listens: a client on its host reaches the front that runs,
    # not the port a config file was changed to since it started.
    Migration(12, "front endpoints", [
        "ALTER TABLE fronts ADD COLUMN endpoint TEXT",
    ]),
    # Atoms carry their subject (whose fact it is); a store made before that has atoms with
    # none, and slot atoms whose subject was the speaker or the self whoever the fact was about
    # ("my wife moved to Boston": the self's home). The atoms stage runs again for those
    # memories (the graph stage follows it), through the stage journal as any pending stage.
    Migration(13, "atoms derived again for their subjects", [
        "UPDATE memory_stages SET status = 'pending', attempts = 0, next_attempt_time = NULL,"
        " enqueued_time = NULL, lease_owner = NULL, lease_until = NULL, last_error = NULL,"
        " update_time = (julianday('now') - 2440587.5) * 86400.0"
        " WHERE stage = 'atoms' AND memory_id IN (SELECT memory_id FROM memory_atoms"
        " WHERE needs_repair = 0 AND (subject IS NULL OR attribute IS NOT NULL))",
    ]),
    # Deleting an atom sets superseded_by NULL wherever it points at it, and a supersede chain
    # is followed by it: without an index each is a scan of every atom (PostgreSQL has had it).
    Migration(14, "index on superseding atoms", [
        "CREATE INDEX memory_atoms_superseded_by ON memory_atoms (superseded_by)",
    ]),
    # A long memory is embedded as passages ("passage" vectors beside its own): the kind check
    # widens (SQLite rebuilds a table to change one), and every memory that may be longer than
    # a passage (160 estimated tokens: never fewer than 160 characters) is embedded again.
    Migration(15, "passage vectors", [
        """
        CREATE TABLE vectors_new (
            kind TEXT NOT NULL CHECK (kind IN ('document', 'graph_entry', 'passage')),
            owner_id INTEGER NOT NULL,
            memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL,
            content_hash TEXT NOT NULL,
            seq INTEGER NOT NULL,
            create_time REAL NOT NULL,
            PRIMARY KEY (kind, owner_id)
        ) WITHOUT ROWID
        """,
        "INSERT INTO vectors_new SELECT kind, owner_id, memory_id, model, dim, vector, content_hash, seq,"
        " create_time FROM vectors",
        "DROP TABLE vectors",
        "ALTER TABLE vectors_new RENAME TO vectors",
        "CREATE INDEX vectors_memory ON vectors (memory_id)",
        "CREATE INDEX vectors_seq ON vectors (seq)",
        "CREATE INDEX vectors_space ON vectors (kind, model, dim)",
        "UPDATE memory_stages SET status = 'pending', attempts = 0, next_attempt_time = NULL,"
        " enqueued_time = NULL, lease_owner = NULL, lease_until = NULL, last_error = NULL,"
        " update_time = (julianday('now') - 2440587.5) * 86400.0"
        " WHERE stage = 'embed' AND status = 'done'"
        " AND memory_id IN (SELECT id FROM documents WHERE length(text) >= 160)",
    ]),
    # How fast a stage is getting done (`aokun status`, the panel's queue page, refreshed every
    # few seconds) counts its rows done in the last minutes: without this index that is a scan
    # of every done row (1.3 s at a million memories). Partial: only done rows are in it, so
    # the other status changes of a stage row do not maintain it.
    Migration(16, "index on recently done stages", [
        "CREATE INDEX memory_stages_done ON memory_stages (stage, update_time) WHERE status = 'done'",
    ]),
]


def open_database(storage: StorageConfig) -> Database:
    """Open the main database under data_dir and bring its schema up to date."""
    db = Database.from_config(storage)
    apply_migrations(db, MIGRATIONS)
    return db

