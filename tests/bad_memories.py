"""What the bad-memory tests share (tests/test_bad_memory.py with the worker's runner in the
test process, tests/process/test_bad_memory_workers.py with real worker processes): planned
memories of two users, the damage that makes one of them unreadable by every stage, a date at
the calendar's edge, and a fake embedding API's settings."""

from __future__ import annotations

from datetime import datetime

from shared.store.model.documents import MemoryFields

DIM = 16
MAY = datetime(2024, 5, 1, 9, 0)
DAMAGE = "UPDATE documents SET topics = '{not json' WHERE id = ?"
AT_THE_EDGE = "UPDATE documents SET original_time = '9999-12-31T00:00:00' WHERE id = ?"
# Planned memories of two users; the second becomes the bad one, the fourth dated 9999-12-31.
TEXTS = [("Alice will fly to Oslo tomorrow", "alice"), ("Alice will call her sister tonight", "alice"),
         ("Bob will meet the dentist on Friday", "bob"), ("Alice will repaint the kitchen tomorrow", "alice"),
         ("Bob is going to run a marathon next month", "bob"), ("Bob will water the plants tomorrow", "bob")]
BAD, EDGE = 1, 3


def embedding(api) -> dict:
    """The embedding section for a FakeEmbeddingsServer(dim=DIM)."""
    return {"provider": "openai", "base_url": api.base_url, "model": "fake-embed", "dimensions": DIM,
            "api_key": "sk-test", "max_retries": 0}


def memorize_all(services) -> list:
    """TEXTS memorized through the real memory service, dated MAY; their documents."""
    return [services.memories.memorize(text, MemoryFields(persona_id=persona, original_time=MAY))
            for text, persona in TEXTS]
