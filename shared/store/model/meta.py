"""The meta table's keys: the store's own numbers (epochs, sequences, its id)."""

from __future__ import annotations

# Bumped by every write that changes what recall can return (documents, atoms, graph).
WRITE_EPOCH = "write_epoch"

# Bumped by every vector write; rows and tombstones carry the number they were written under.
VECTOR_SEQ = "vector_seq"

# Vector tombstones at or below this number were pruned: a front that saw less must rebuild.
VECTOR_TOMBSTONE_FLOOR = "vector_tombstone_floor"

# The time of the last daily importance decay applied (epoch seconds).
DECAY_APPLIED_AT = "decay_applied_at"

# The package version that last opened the store (1.2.3 -> 1002003).
PACKAGE_VERSION = "package_version"

# A random number naming this store, made when its first FAISS snapshot is written
# (shared/search/snapshot.py): a snapshot made from another store's database is never loaded.
STORE_ID = "store_id"

# When the last worker whose row is gone (stopped, or pruned long dead) was last seen (epoch
# seconds): a store whose workers all stopped is not one where no worker ever ran.
WORKERS_LAST_SEEN = "workers_last_seen"

KEYS = (WRITE_EPOCH, VECTOR_SEQ, VECTOR_TOMBSTONE_FLOOR, DECAY_APPLIED_AT, PACKAGE_VERSION, STORE_ID,
        WORKERS_LAST_SEEN)
