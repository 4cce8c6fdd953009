"""The store: one interface (interface.py: Store, Session, one Protocol per aggregate) and its
SQLite engine (sqlite_store.py, sqlite_repos.py) over one module per group of tables, each
owning its DDL and SQL. Open one with schema.open_store."""
