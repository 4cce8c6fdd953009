"""Reading a store's pg_dump archive without restoring it: whether it is a whole dump of an
Aokun store (check_dump, the backup's and the restore's check) and whether it holds a given
memory (dump_holds, for `backups_holding`). pg_restore does the reading.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from shared.store.postgres.clients import tool, why

# The table of contents entries of a store's dump (`pg_restore --list`):
# "<id>; <oid> <oid> <kind> <schema> <name> <owner>".
_TOC_DOCUMENTS = re.compile(r"^\d+; \d+ \d+ TABLE public documents ", re.MULTILINE)
_TOC_DOCUMENTS_DATA = re.compile(r"^\d+; \d+ \d+ TABLE DATA public documents ", re.MULTILINE)
# A COPY block of the documents table in pg_restore's script, and COPY's text escapes.
_COPY_DOCUMENTS = re.compile(rb"^COPY public\.documents \((.*)\) FROM stdin;$")
_COPY_ESCAPE = re.compile(rb"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.DOTALL)
_COPY_CHARS = {b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t", b"v": b"\v"}


def check_dump(path: Path) -> tuple[bool, str]:
    """(ok, detail): pg_restore reads the archive's table of contents, which lists the
    documents table and its data, and reads every data block back whole."""
    path = Path(path)
    if not path.is_file():
        return False, f"{path} is not a file"
    pg_restore = tool("pg_restore")
    listing = subprocess.run([pg_restore, "--list", str(path)], capture_output=True, text=True)
    if listing.returncode != 0:
        return False, f"not a readable pg_dump archive ({why(listing)})"
    if not (_TOC_DOCUMENTS.search(listing.stdout) and _TOC_DOCUMENTS_DATA.search(listing.stdout)):
        return False, "not a dump of an Aokun store (no documents table)"
    whole = subprocess.run([pg_restore, f"--file={os.devnull}", str(path)], capture_output=True, text=True)
    if whole.returncode != 0:
        return False, f"the archive is damaged ({why(whole)})"
    return True, "ok"


def dump_holds(path: Path, memory_id: int, content_hash: str, create_time: float) -> bool:
    """Whether the dump's documents data has a row with this id and this content hash or
    creation time. pg_restore streams that table's data only (COPY text, one row a line);
    it is read a line at a time and stopped at the first match. A dump that cannot be read
    (or no pg_restore) holds nothing here."""
    pg_restore = shutil.which("pg_restore")
    if pg_restore is None:
        return False
    reader = subprocess.Popen([pg_restore, "--data-only", "--table=documents", "--file=-", str(path)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    data = reader.stdout
    assert data is not None  # stdout=PIPE
    try:
        return _copy_holds(data, memory_id, content_hash, create_time)
    finally:
        if reader.poll() is None:
            reader.kill()
        data.close()
        reader.wait()


def _copy_holds(lines: Iterable[bytes], memory_id: int, content_hash: str, create_time: float) -> bool:
    columns = None
    prefix: bytes | None = None
    for raw in lines:
        line = raw.rstrip(b"\n")
        if columns is None:
            header = _COPY_DOCUMENTS.match(line)
            if header:
                names = [name.strip().strip('"') for name in header.group(1).decode().split(",")]
                try:
                    columns = (names.index("id"), names.index("content_hash"), names.index("create_time"))
                except ValueError:
                    return False
                prefix = f"{memory_id}\t".encode() if columns[0] == 0 else None
            continue
        if line == b"\\.":
            return False  # the end of the table's data
        if prefix is not None and not line.startswith(prefix):
            continue  # the common case, without splitting the row
        fields = line.split(b"\t")  # tabs inside values are escaped (\t)
        try:
            if int(fields[columns[0]]) != memory_id:
                continue
            if _unescape(fields[columns[1]]) == content_hash or float(fields[columns[2]]) == create_time:
                return True
        except (IndexError, ValueError):
            continue
    return False


def _unescape(field: bytes) -> str | None:
    """A value of COPY's text format (\\N is NULL)."""
    if field == b"\\N":
        return None

    def one(match: re.Match[bytes]) -> bytes:
        octal, hexa, char = match.groups()
        if octal:
            return bytes([int(octal, 8) & 0xFF])
        if hexa:
            return bytes([int(hexa, 16)])
        return _COPY_CHARS.get(char, char)

    return _COPY_ESCAPE.sub(one, field).decode("utf-8", "replace")
