"""Backups of a store on PostgreSQL: pg_dump's custom format, checked, and restored all-or-nothing.

The files follow the backups folder's rules (shared/store/backup.py): aokun-<stamp>-<reason>.dump,
written as <name>.partial under the folder's lock, checked, then renamed; leftovers of a killed
backup are swept; retention prunes both kinds. pg_dump reads one snapshot of the database, so
writers keep going and the copy is consistent. Only the `public` schema is dumped: the store's
tables, sequences and functions live there (extensions and other schemas are not the store's).

A dump is checked by pg_restore: its table of contents must list the documents table and its
data, and every data block must read back whole (a truncated or damaged file fails here).

Restore, all-or-nothing: the dump is checked first (a damaged one is refused before anything
is touched); then ONE transaction does everything: it takes the store's write lock, drops
every object of the public schema (not the schema itself, nor extensions' objects), replays
the script pg_restore makes from the dump (--no-owner --no-privileges; the dump's `CREATE
SCHEMA public` left out), deletes the worker and front rows the dump carries, writes a new
store_incarnation value, checks that every table, sequence, index and constraint the dump
lists is there, and COMMITs. PostgreSQL's DDL is transactional, so a failure anywhere rolls
back to the old data untouched.

This process writes that transaction into psql's input (ON_ERROR_STOP, no --single-transaction):
BEGIN, the prelude, pg_restore's script as it streams out, the epilogue, and COMMIT — the
COMMIT only once pg_restore has exited successfully. psql ends a transaction only where its
input says so: at the end of its input inside one it just exits, and the server rolls the
transaction back. So a restore stopped anywhere before that COMMIT — pg_restore failing, or
this process killed (even while psql still waits for the lock, holding part of the script:
psql reads on to the cut, then the end) — changes nothing. (psql's --single-transaction
would not do: it COMMITs at the end of its input, however early that end comes.)

The password goes to pg_dump, pg_restore and psql as PGPASSWORD in their environment, never on
their command line (a password in storage.url is taken out of the connection string passed).
"""

from __future__ import annotations

import io
import re
import secrets
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psycopg

from shared.config import StorageConfig
from shared.errors import StorageError
from shared.store.backup import DUMP_SUFFIX, forget_queue, other_engine_refusal, refuse_restoring, write_backup
from shared.store.postgres.clients import connection, first_error, password_of, run, tool, why
from shared.store.postgres.connection import WRITE_LOCK, PgDatabase, where
from shared.store.postgres.dump_reading import check_dump

# store_incarnation values are in 1 .. 2**52 (as the migration's random() makes them).
INCARNATION_RANGE = 1 << 52
# Entries left out of a restore: the schema itself (it stays, with its owner and grants), and
# large objects (no store has any; pg_restore would wrap them in a COMMIT of their own).
_TOC_LEFT_OUT = re.compile(r"^\d+; \d+ \d+ (SCHEMA - public|COMMENT - SCHEMA public|ACL - SCHEMA public|"
                           r"BLOB|BLOBS|BLOB METADATA|LARGE OBJECT) ")
# Entries a restore checks for before it commits: a relation, and a constraint (of its table).
_TOC_RELATION = re.compile(r"^\d+; \d+ \d+ (?:TABLE|SEQUENCE|INDEX) public (\w+)(?: \S+)?$")
_TOC_CONSTRAINT = re.compile(r"^\d+; \d+ \d+ (?:FK )?CONSTRAINT public (\w+) (\w+)(?: \S+)?$")


# -- backup ----------------------------------------------------------------------------------

def dump_database(db: PgDatabase, directory: Path, now: float, reason: str) -> Path:
    """pg_dump the store's database into a new aokun-<stamp>-<reason>.dump in directory
    (writers keep going); return it. Written as .partial, checked, renamed."""
    pg_dump = tool("pg_dump")
    tool("pg_restore")  # the check needs it: say so before writing anything
    conninfo, env = connection(db.url, db.password)

    def write(partial: Path) -> None:
        run([pg_dump, "--format=custom", "--schema=public", "--no-password", f"--file={partial}",
             f"--dbname={conninfo}"], env, db.location, "backup")

    return write_backup(directory, now, reason, DUMP_SUFFIX, write, check_dump)


# -- restore ---------------------------------------------------------------------------------

def restore_dump(file: Path, storage: StorageConfig, live_workers: list[str]) -> str:
    """Replace the store's database contents with the dump's, in one transaction; return the
    database (host:port/name). Refuses a damaged dump, a SQLite backup, and a store whose
    worker is alive (stop every process on it first)."""
    file = Path(file)
    location = where(storage.url)
    if file.name.endswith(".db") or _is_sqlite(file):
        raise other_engine_refusal(file, "a SQLite backup (*.db)", "SQLite", "PostgreSQL")
    refuse_restoring(file, check_dump(file), live_workers, location)
    pg_restore, psql = tool("pg_restore"), tool("psql")
    conninfo, env = connection(storage.url, password_of(storage))
    new = _new_incarnation(conninfo, env, location)
    with tempfile.TemporaryDirectory(prefix="aokun-restore-") as scratch:
        listing = Path(scratch) / "entries.list"
        entries = _write_entries(pg_restore, file, listing)
        _load(reader=[pg_restore, "--no-owner", "--no-privileges", f"--use-list={listing}", "--file=-", str(file)],
              loader=[psql, "--no-psqlrc", "--quiet", "--no-password", "--set=ON_ERROR_STOP=1", "--file=-",
                      f"--dbname={conninfo}"],
              opening=_prelude(storage.busy_timeout_ms), closing=_epilogue(new) + _completeness_check(entries),
              before_commit=lambda: forget_queue(storage),
              env=env, scratch=Path(scratch), file=file, location=location)
    return location


def _prelude(busy_timeout_ms: int) -> str:
    """Inside the restore's transaction, first: the write lock (no store write interleaves),
    then every object of the public schema dropped — not the schema, not extensions' members."""
    return f"""
SET LOCAL lock_timeout = '{max(int(busy_timeout_ms), 1)}ms';
SELECT pg_advisory_xact_lock({WRITE_LOCK});
DO $aokun$
DECLARE
    item record;
BEGIN
    FOR item IN
        SELECT CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                              WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS kind,
               format('%I.%I', n.nspname, c.relname) AS name
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('v', 'm', 'r', 'p', 'f', 'S')
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                          AND d.objid = c.oid AND d.deptype = 'e')
        ORDER BY c.relkind = 'S', c.relkind IN ('r', 'p', 'f')
    LOOP
        EXECUTE format('DROP %s IF EXISTS %s CASCADE', item.kind, item.name);
    END LOOP;
    FOR item IN
        SELECT CASE p.prokind WHEN 'a' THEN 'AGGREGATE' ELSE 'ROUTINE' END AS kind,
               p.oid::regprocedure::text AS name
        FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                          AND d.objid = p.oid AND d.deptype = 'e')
    LOOP
        EXECUTE format('DROP %s IF EXISTS %s CASCADE', item.kind, item.name);
    END LOOP;
    FOR item IN
        SELECT CASE t.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END AS kind,
               format('%I.%I', 'public', t.typname) AS name
        FROM pg_type t
        WHERE t.typnamespace = 'public'::regnamespace AND t.typtype IN ('c', 'd', 'e', 'r', 'm')
          AND (t.typtype <> 'c' OR (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c')
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_type'::regclass
                          AND d.objid = t.oid AND d.deptype = 'e')
    LOOP
        EXECUTE format('DROP %s IF EXISTS %s CASCADE', item.kind, item.name);
    END LOOP;
    FOR item IN
        SELECT format('%I.%I', 'public', c.cfgname) AS name FROM pg_ts_config c
        WHERE c.cfgnamespace = 'public'::regnamespace
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_ts_config'::regclass
                          AND d.objid = c.oid AND d.deptype = 'e')
    LOOP
        EXECUTE format('DROP TEXT SEARCH CONFIGURATION IF EXISTS %s CASCADE', item.name);
    END LOOP;
    FOR item IN
        SELECT format('%I.%I', 'public', t.dictname) AS name FROM pg_ts_dict t
        WHERE t.dictnamespace = 'public'::regnamespace
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_ts_dict'::regclass
                          AND d.objid = t.oid AND d.deptype = 'e')
    LOOP
        EXECUTE format('DROP TEXT SEARCH DICTIONARY IF EXISTS %s CASCADE', item.name);
    END LOOP;
END
$aokun$;
"""


def _epilogue(incarnation: int) -> str:
    """Inside the restore's transaction, after the script: forget the processes that ran on
    the source store (here they would pass for live ones), and a new incarnation (no cache
    made from the replaced data is used)."""
    return f"""
DELETE FROM public.workers;
DELETE FROM public.fronts;
DELETE FROM public.store_incarnation;
INSERT INTO public.store_incarnation (value) VALUES ({int(incarnation)});
"""


def _completeness_check(entries: list[str]) -> str:
    """Inside the restore's transaction, after the script: every table, sequence, index and
    constraint the dump lists is there, or the transaction fails (and rolls back)."""
    relations = sorted({m.group(1) for m in map(_TOC_RELATION.match, entries) if m})
    constraints = sorted({m.groups() for m in map(_TOC_CONSTRAINT.match, entries) if m})
    pairs = ", ".join(f"({_literal(table)}, {_literal(name)})" for table, name in constraints) or "(NULL, NULL)"
    return f"""
DO $aokun$
BEGIN
    IF (SELECT count(*) FROM pg_catalog.pg_class
        WHERE relnamespace = 'public'::regnamespace
          AND relname::text = ANY (ARRAY[{", ".join(map(_literal, relations))}]::text[])) <> {len(relations)}
    OR (SELECT count(*) FROM pg_catalog.pg_constraint c JOIN pg_catalog.pg_class t ON t.oid = c.conrelid
        WHERE t.relnamespace = 'public'::regnamespace
          AND (t.relname::text, c.conname::text) IN (VALUES {pairs})) <> {len(constraints)} THEN
        RAISE EXCEPTION 'the restored store lacks tables, indexes or constraints the dump lists';
    END IF;
END
$aokun$;
"""


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _write_entries(pg_restore: str, file: Path, listing: Path) -> list[str]:
    """The dump's table of contents minus what a restore leaves out, written for --use-list;
    return its entries."""
    listed = subprocess.run([pg_restore, "--list", str(file)], capture_output=True, text=True)
    if listed.returncode != 0:
        raise StorageError(f"refusing to restore {file}: not a readable pg_dump archive ({why(listed)})")
    kept = [line for line in listed.stdout.splitlines() if not _TOC_LEFT_OUT.match(line)]
    listing.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return [line for line in kept if not line.startswith(";")]


def _load(reader: list[str], loader: list[str], opening: str, closing: str, before_commit: Callable[[], None],
          env: Mapping[str, str], scratch: Path, file: Path, location: str) -> None:
    """Run the restore's transaction in psql: BEGIN and `opening`, pg_restore's script
    streamed through, `closing`, then — only once pg_restore has finished successfully —
    `before_commit()` and COMMIT. Stopped before that, psql's input ends inside the
    transaction (or psql is killed), and the server rolls it back."""
    reader_err, loader_out = scratch / "pg_restore.err", scratch / "psql.out"
    with open(reader_err, "wb") as rerr, open(loader_out, "wb") as lout:
        source = subprocess.Popen(reader, stdout=subprocess.PIPE, stderr=rerr)
        sink = subprocess.Popen(loader, stdin=subprocess.PIPE, stdout=lout, stderr=subprocess.STDOUT, env=env)
        # Both pipes asked for above, buffered (Popen's default bufsize).
        dump, sink_input = source.stdout, sink.stdin
        assert isinstance(dump, io.BufferedReader) and sink_input is not None
        try:
            # A write that fails means psql stopped at an error (ON_ERROR_STOP): it rolled back.
            sent = _send(sink, f"BEGIN;\n{opening}".encode()) and all(
                _send(sink, chunk) for chunk in iter(lambda: dump.read1(1 << 16), b""))
            if not sent:
                source.kill()
            dump.close()
            if source.wait() != 0 and sent:
                sink.kill()  # its transaction never reaches COMMIT: the server rolls it back
                sink.wait()
                raise StorageError(f"restore of {file} failed reading the dump "
                                   f"({first_error(reader_err.read_text('utf-8', 'replace'))}); "
                                   f"nothing was changed in {location}")
            committing = sent and _send(sink, closing.encode())
            if committing:
                before_commit()
                committing = _send(sink, b"COMMIT;\n")
            try:
                sink_input.close()
            except BrokenPipeError:
                pass
            if sink.wait() != 0 or not committing:
                detail = first_error(loader_out.read_text("utf-8", "replace"))
                if "lock timeout" in detail:
                    detail += " (another process holds the store: stop every front and worker on it first)"
                raise StorageError(f"restore of {file} into {location} failed and was rolled back, "
                                   f"nothing was changed: {detail}")
        finally:
            for process in (source, sink):
                if process.poll() is None:
                    process.kill()
                    process.wait()


def _send(sink: subprocess.Popen[bytes], data: bytes) -> bool:
    """Write into psql's input; False if psql has stopped reading it."""
    assert sink.stdin is not None  # started with stdin=PIPE
    try:
        sink.stdin.write(data)
        sink.stdin.flush()
        return True
    except BrokenPipeError:
        return False


def _new_incarnation(conninfo: str, env: Mapping[str, str], location: str) -> int:
    """A random incarnation value other than the database's current one."""
    current = None
    password = env.get("PGPASSWORD")
    try:
        extra: dict[str, Any] = {"password": password} if password else {}
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=10, **extra) as conn:
            exists = conn.execute("SELECT to_regclass('public.store_incarnation')").fetchone()
            if exists is not None and exists[0] is not None:  # a SELECT of one value: always a row
                row = conn.execute("SELECT value FROM public.store_incarnation").fetchone()
                current = row[0] if row else None
    except psycopg.Error as exc:
        raise StorageError(f"cannot reach the PostgreSQL database {location} to restore into "
                           f"({first_error(str(exc))}): check that the server runs and storage.url") from exc
    while True:
        value = secrets.randbelow(INCARNATION_RANGE) + 1
        if value != current:
            return value


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == b"SQLite format 3\0"
    except OSError:
        return False
