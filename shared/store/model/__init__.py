"""The store's model: the value types, enumerations, limits and pure helpers the layers above
the store and both engines share (one module per aggregate, and `record` for a result row).
Nothing here imports an engine."""
