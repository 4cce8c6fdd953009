"""Retrieval channels and their fusion."""
