"""The PostgreSQL database a benchmark runs on (--backend postgresql): made on the server at
--pg (default: the local development server), kept when the run has a --work folder (its
name is written there, so a later run reuses it), else dropped at the end."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432"


def _admin(server: str):
    import psycopg

    return psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=5)


@contextmanager
def bench_database(server: str, work: Path | None) -> Iterator[str]:
    """The URL of this run's database."""
    named = work / "postgres-database.txt" if work is not None else None
    if named is not None and named.exists():
        yield f"{server}/{named.read_text().strip()}"
        return
    name = f"aokun_bench_{uuid.uuid4().hex[:12]}"
    with _admin(server) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    if named is not None:
        named.write_text(name)
    try:
        yield f"{server}/{name}"
    finally:
        if named is None:
            with _admin(server) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_sql(url: str, statements: list[tuple[str, tuple]]) -> None:
    """Statements (with %s placeholders) in one transaction on the database."""
    import psycopg

    with psycopg.connect(url) as conn:
        for sql, params in statements:
            conn.execute(sql, params)


# -- a PostgreSQL server of one's own (a test's or the chaos run's, to restart it) ------------------

def _newest_server_programs() -> Path:
    """Debian's newest PostgreSQL server programs (/usr/lib/postgresql/<version>/bin)."""
    found = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()]
    found.sort(key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    return found[-1] if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _newest_server_programs()


def _as_postgres_user(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root (CI), run its programs as `postgres`."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


class OwnPostgres:
    """initdb'd in a folder of the test's, on a port of its own, trust authentication."""

    def __init__(self, folder: Path, port: int):
        self.folder, self.port = folder, port
        self.data = folder / "pgdata"
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    @staticmethod
    def available() -> bool:
        return (PG_BIN / "initdb").exists()

    def init(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", "postgres", str(self.folder)], check=True)
            self.folder.chmod(0o755)
            for parent in self.folder.parents:  # the postgres user must reach the folder
                if parent == Path("/"):
                    break
                parent.chmod(parent.stat().st_mode | 0o005)
        subprocess.run(_as_postgres_user([str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
                                          "--auth=trust", "--no-sync", "-E", "UTF8"]),
                       check=True, capture_output=True)

    def start(self) -> None:
        subprocess.run(_as_postgres_user([
            str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-l", str(self.folder / "pg.log"),
            "-o", f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start"]), check=True, capture_output=True)

    def stop(self, mode: str = "fast", if_running: bool = False) -> None:
        """Stop the server; return once it has (pg_ctl -w). A stop that fails raises with
        pg_ctl's words; with if_running, a server that was not running is no failure."""
        done = subprocess.run(_as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60",
                                                 "-m", mode, "stop"]), capture_output=True, text=True)
        if done.returncode == 0 or (if_running and not self.running()):
            return
        raise RuntimeError(f"pg_ctl stop -m {mode} failed for {self.data} (exit {done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()}")

    def running(self) -> bool:
        """Whether a server runs on the data directory (pg_ctl status: 0 running, 3 not);
        a data directory pg_ctl cannot read raises with its words."""
        done = subprocess.run(_as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "status"]),
                              capture_output=True, text=True)
        if done.returncode in (0, 3):
            return done.returncode == 0
        raise RuntimeError(f"pg_ctl status failed for {self.data} (exit {done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()}")


@contextmanager
def own_postgres_server(folder: Path, port: int) -> Iterator[OwnPostgres]:
    """A PostgreSQL server of one's own in folder, started; stopped at the end (whether or not
    it was still running)."""
    server = OwnPostgres(folder, port)
    server.init()
    server.start()
    try:
        yield server
    finally:
        server.stop("immediate", if_running=True)
