"""One result row, the same from every engine."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar


class Record(tuple[Any, ...]):
    """One result row, the same from every engine: a tuple (unpack it, index it, compare it
    with a tuple) whose columns are also read by name (row["text"], or row.text as a
    template does), and that dict(row) turns into {column: value}."""

    __slots__ = ()
    _index: ClassVar[dict[str, int]] = {}

    @staticmethod
    @lru_cache(maxsize=512)
    def kind(columns: tuple[str, ...]) -> type[Record]:
        """The Record class of rows with these columns (the first of a repeated name wins)."""
        index: dict[str, int] = {}
        for position, name in enumerate(columns):
            index.setdefault(name, position)
        return type("Record", (Record,), {"__slots__": (), "_index": index})

    def __getitem__(self, key: Any) -> Any:  # a column by position, name or slice
        if isinstance(key, str):
            try:
                key = self._index[key]
            except KeyError:
                raise KeyError(f"no column {key!r} (columns: {', '.join(self._index)})") from None
        return super().__getitem__(key)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._index:
            raise AttributeError(name)
        return super().__getitem__(self._index[name])

    def keys(self) -> list[str]:
        return list(self._index)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._index else default

    def __repr__(self) -> str:
        return "Record(" + ", ".join(f"{k}={self[i]!r}" for k, i in self._index.items()) + ")"
