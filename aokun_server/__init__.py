"""The Aokun MCP front: validates, commits, enqueues and answers recall."""
