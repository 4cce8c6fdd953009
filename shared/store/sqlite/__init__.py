"""The SQLite engine: one database file (db.py), its migrations (schema.py), the store and its
sessions (store.py), the aggregates (aggregates.py), FTS5 (fts.py, match.py), backups and
restores (backup.py, restore.py)."""
