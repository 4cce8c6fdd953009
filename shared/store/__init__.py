"""The SQLite store: one module per group of tables, each owning its DDL and SQL."""
