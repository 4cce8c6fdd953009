"""Code shared by the Aokun MCP front and its workers: config, store, text processing."""

__version__ = "0.1.0"
