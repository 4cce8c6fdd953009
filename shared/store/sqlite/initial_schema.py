"""Version 1 of the SQLite schema, as it was first frozen (schema.py holds every migration).

Never edited: a store in the field was created by exactly this text. A change is a new
migration in schema.py.
"""

from __future__ import annotations

INITIAL_SCHEMA = [
    """
    CREATE TABLE documents (
        id INTEGER PRIMARY KEY,
        text TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        topics TEXT NOT NULL DEFAULT '[]',
        participants TEXT NOT NULL DEFAULT '[]',
        key_facts TEXT NOT NULL DEFAULT '[]',
        sentiment TEXT NOT NULL DEFAULT 'neutral'
            CHECK (sentiment IN ('positive', 'neutral', 'negative')),
        importance REAL NOT NULL DEFAULT 0.5 CHECK (importance >= 0.0 AND importance <= 1.0),
        pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
        archived INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
        session_id TEXT,
        persona_id TEXT,
        original_time TEXT,
        original_ts REAL,
        persona_summary TEXT,
        access_count INTEGER NOT NULL DEFAULT 0,
        last_access_time REAL,
        create_time REAL NOT NULL,
        update_time REAL NOT NULL
    )
    """,
    "CREATE INDEX documents_persona ON documents (persona_id, id)",
    "CREATE INDEX documents_session ON documents (session_id, id)",
    "CREATE INDEX documents_original_ts ON documents (original_ts)",
    "CREATE VIRTUAL TABLE documents_fts USING fts5(tokens, tokenize = 'porter unicode61 remove_diacritics 2')",
    """
    CREATE TABLE memory_stages (
        memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        stage TEXT NOT NULL CHECK (stage IN ('embed', 'atoms', 'graph')),
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'running', 'done', 'failed')),
        content_hash TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_until REAL,
        next_attempt_time REAL,
        enqueued_time REAL,
        last_error TEXT,
        update_time REAL NOT NULL,
        PRIMARY KEY (memory_id, stage)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX memory_stages_status ON memory_stages (status, lease_until)",
    """
    CREATE TABLE memory_atoms (
        id INTEGER PRIMARY KEY,
        memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        persona_id TEXT,
        session_id TEXT,
        type TEXT NOT NULL CHECK (type IN ('episodic', 'planned', 'factual', 'relational', 'preference', 'unknown')),
        text TEXT NOT NULL,
        subject TEXT,
        attribute TEXT,
        value TEXT,
        confidence REAL NOT NULL DEFAULT 0.0,
        importance REAL NOT NULL DEFAULT 0.5,
        ttl_days REAL,
        deadline REAL,
        reinforcement_count INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'expired', 'forgotten', 'purged', 'dormant', 'superseded')),
        state_time REAL,
        superseded_by INTEGER REFERENCES memory_atoms(id) ON DELETE SET NULL,
        needs_repair INTEGER NOT NULL DEFAULT 0,
        content_hash TEXT,
        create_time REAL NOT NULL,
        update_time REAL NOT NULL
    )
    """,  # noqa: E501 - a migration's text stays as stores were made with it
    "CREATE INDEX memory_atoms_memory ON memory_atoms (memory_id)",
    "CREATE INDEX memory_atoms_persona_state ON memory_atoms (persona_id, state)",
    "CREATE VIRTUAL TABLE atoms_fts USING fts5(tokens, tokenize = 'porter unicode61 remove_diacritics 2')",
    """
    CREATE TABLE graph_nodes (
        id INTEGER PRIMARY KEY,
        persona_id TEXT NOT NULL DEFAULT '',
        key TEXT NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('topic', 'person', 'fact')),
        value TEXT NOT NULL,
        canonical TEXT NOT NULL,
        create_time REAL NOT NULL,
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
        type TEXT NOT NULL CHECK (type IN ('describes', 'mentioned_in', 'co_occurs_with')),
        confidence REAL NOT NULL DEFAULT 0.0,
        weight REAL NOT NULL DEFAULT 1.0,
        create_time REAL NOT NULL
    )
    """,
    "CREATE INDEX graph_edges_src ON graph_edges (src_node_id, confidence DESC, source_memory_id DESC)",
    "CREATE INDEX graph_edges_dst ON graph_edges (dst_node_id, confidence DESC, source_memory_id DESC)",
    "CREATE INDEX graph_edges_src_weight ON graph_edges (src_node_id, weight DESC, dst_node_id)",
    "CREATE INDEX graph_edges_dst_weight ON graph_edges (dst_node_id, weight DESC, src_node_id)",
    "CREATE INDEX graph_edges_memory ON graph_edges (source_memory_id)",
    """
    CREATE TABLE graph_entries (
        id INTEGER PRIMARY KEY,
        source_memory_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        node_id INTEGER REFERENCES graph_nodes(id) ON DELETE SET NULL,
        persona_id TEXT,
        text TEXT NOT NULL,
        confidence REAL NOT NULL DEFAULT 0.0,
        content_hash TEXT,
        create_time REAL NOT NULL
    )
    """,
    "CREATE INDEX graph_entries_memory ON graph_entries (source_memory_id)",
    "CREATE INDEX graph_entries_node ON graph_entries (node_id, confidence DESC, source_memory_id DESC)",
    "CREATE VIRTUAL TABLE graph_entries_fts USING fts5(tokens, tokenize = 'porter unicode61 remove_diacritics 2')",
    """
    CREATE TABLE vectors (
        kind TEXT NOT NULL CHECK (kind IN ('document', 'graph_entry')),
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
    "CREATE INDEX vectors_memory ON vectors (memory_id)",
    "CREATE INDEX vectors_seq ON vectors (seq)",
    """
    CREATE TABLE vector_tombstones (
        seq INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        owner_id INTEGER NOT NULL,
        create_time REAL NOT NULL
    )
    """,
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID",
    """
    CREATE TABLE workers (
        worker_id TEXT PRIMARY KEY,
        pid INTEGER NOT NULL,
        hostname TEXT NOT NULL,
        started_time REAL NOT NULL,
        heartbeat_time REAL NOT NULL
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE periodic_runs (
        name TEXT PRIMARY KEY,
        last_run_time REAL NOT NULL
    ) WITHOUT ROWID
    """,
]
