"""Where an import of a large file got to, so a run that stopped (killed, a storage failure) is
resumed there rather than read again from the start.

One small JSON file per imported file, in data_dir/imports/, named by the file's path, size
and modification time and by what it is imported as (format, persona): a changed file, or
the same file imported into another persona, starts from the beginning. It is written after a
conversation is committed, never before, so it can only lag behind the store; exactly-once
is the store's (memorize_once by source_hash), the position only saves re-reading. It is
removed when the file has been read to its end. A position that cannot be read or written
is no position: the import goes on from the start, or without saving one, warned once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeGuard

FOLDER = "imports"


class Position:
    def __init__(self, data_dir: Path, path: Path, kind: str, warn: Callable[[str], object]):
        stat = path.stat()
        self.source = str(path.resolve())
        self.key = f"{self.source}\n{stat.st_size}\n{stat.st_mtime_ns}\n{kind}"
        digest = hashlib.sha256(self.key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
        self.file = data_dir / FOLDER / f"{digest}.json"
        self.warn = warn
        self.broken = False

    def load(self) -> tuple[int, int]:
        """(byte offset, conversations done) where an earlier run of this import stopped;
        (0, 0) when none did."""
        try:
            saved = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return 0, 0
        if not isinstance(saved, dict) or saved.get("key") != self.key:
            return 0, 0
        offset, done = saved.get("offset"), saved.get("done")
        if not (_count(offset) and _count(done)):
            return 0, 0
        return offset, done

    def save(self, offset: int, done: int) -> None:
        if self.broken:
            return
        temporary = self.file.with_suffix(".tmp")
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps({"key": self.key, "file": self.source, "offset": offset,
                                             "done": done}), encoding="utf-8")
            os.replace(temporary, self.file)
        except OSError as exc:
            self.broken = True
            self.warn(f"cannot keep the import's position in {self.file.parent} ({exc.strerror or exc}): "
                      "a run after a stop reads the file from its start (nothing is stored twice)")

    def clear(self) -> None:
        try:
            self.file.unlink(missing_ok=True)
        except OSError:
            pass  # left: the next run resumes at the file's end and finds nothing more to import


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
