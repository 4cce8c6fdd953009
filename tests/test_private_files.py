"""A backup holds every memory: `aokun backup` writes it readable by its owner only (0600), in a
backup folder and a data folder that are their owner's only (0700), on both engines; a data
folder, a backup folder and backups from before are tightened the same way, and a restored
SQLite file is its owner's only. The commands run with umask 0, so the modes are Aokun's own
doing, not the umask's."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import write_config
from servers import pg_url  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")

BIN = Path(sys.executable).parent


def aokun(config: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([str(BIN / "aokun"), *args, "--config", str(config)], capture_output=True, text=True,
                          timeout=120, umask=0)
    assert done.returncode == 0, done.stderr
    return done


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def storage_of(engine: str, request) -> dict:
    if engine == "postgresql":
        return {"backend": "postgresql", "url": request.getfixturevalue("pg_url")}
    return {}


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_new_data_folder_and_its_backups_are_their_owners_only(engine, tmp_path, request):
    config = write_config(tmp_path, storage=storage_of(engine, request))
    data = tmp_path / "data"
    assert not data.exists()
    backup = Path(aokun(config, "backup").stdout.strip().splitlines()[-1])
    assert backup.parent == data / "backups"
    assert (mode(data), mode(data / "backups"), mode(backup)) == (0o700, 0o700, 0o600)


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_folders_and_backups_from_before_are_made_their_owners_only(engine, tmp_path, request):
    config = write_config(tmp_path, storage=storage_of(engine, request))
    data = tmp_path / "data"
    (data / "backups").mkdir(parents=True)
    old = data / "backups" / f"aokun-20200101-000000-000-manual.{'dump' if engine == 'postgresql' else 'db'}"
    old.write_bytes(b"an earlier backup")
    for path, loose in ((data, 0o755), (data / "backups", 0o777), (old, 0o755)):
        path.chmod(loose)
    backup = Path(aokun(config, "backup").stdout.strip().splitlines()[-1])
    assert (mode(data), mode(data / "backups"), mode(old), mode(backup)) == (0o700, 0o700, 0o600, 0o600)


def test_a_restored_sqlite_store_is_its_owners_only(tmp_path):
    config = write_config(tmp_path)
    backup = Path(aokun(config, "backup").stdout.strip().splitlines()[-1])
    (tmp_path / "data" / "aokun.db").chmod(0o644)
    aokun(config, "restore", str(backup))
    assert mode(tmp_path / "data" / "aokun.db") == 0o600


def test_an_export_is_its_owners_only(tmp_path):
    """An export holds the memories it covers, as a backup does: JSONL and Markdown alike."""
    config = write_config(tmp_path)
    aokun(config, "import", "--format", "jsonl", str(_one_memory(tmp_path)))
    jsonl_out, markdown_out = tmp_path / "out" / "all.jsonl", tmp_path / "md"
    aokun(config, "export", str(jsonl_out))
    aokun(config, "export", "--format", "markdown", str(markdown_out))
    files = [jsonl_out, *markdown_out.glob("*.md")]
    assert len(files) == 2 and [mode(path) for path in files] == [0o600, 0o600]


def _one_memory(tmp_path: Path) -> Path:
    rows = tmp_path / "in.jsonl"
    rows.write_text('{"text": "my locker code is 4471"}\n', encoding="utf-8")
    return rows
