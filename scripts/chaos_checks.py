"""The checks after a chaos run on SQLite (scripts/chaos.py): drain the stage rows, read the
store independently of the product, run `aokun doctor` and PRAGMA integrity_check, and print
the report (also the team run's, chaos_team.py)."""

from __future__ import annotations

import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

from chaos_storm import Tally

BIN = Path(sys.executable).parent
DOCTOR_TIMEOUT_S = 180.0


def stage_counts(db_path: Path) -> dict[str, int]:
    with _connect(db_path) as conn:
        return dict(conn.execute("SELECT status, COUNT(*) FROM memory_stages GROUP BY status"))


def drain(db_path: Path, timeout: float) -> float | None:
    """Seconds until no stage row is pending or running, or None after `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        counts = stage_counts(db_path)
        if not counts.get("pending") and not counts.get("running"):
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def _connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db_path, timeout=30)
    conn.isolation_level = None
    return conn


def run_doctor(config: Path) -> tuple[int, str]:
    try:
        done = subprocess.run([str(BIN / "aokun"), "doctor", "--config", str(config)],
                              capture_output=True, text=True, timeout=DOCTOR_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return -1, f"aokun doctor gave no answer within {DOCTOR_TIMEOUT_S:.0f} s"
    return done.returncode, (done.stdout + done.stderr).strip()


def integrity(data_dir: Path) -> dict[str, str]:
    found = {}
    for path in sorted(data_dir.glob("*.db")):
        with _connect(path) as conn:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        found[path.name] = "ok" if rows == [("ok",)] else "; ".join(r[0] for r in rows[:5])
    return found


def store_checks(db_path: Path, acked: dict[int, str], run: str) -> dict:
    """Independent reads of the database after the drain."""
    with _connect(db_path) as conn:
        texts = dict(conn.execute("SELECT id, text FROM documents"))
        tagged = {i for i, t in texts.items() if run in t}
        duplicates = conn.execute(
            "SELECT COUNT(*) FROM (SELECT text FROM documents WHERE instr(text, ?) > 0 "
            "GROUP BY text HAVING COUNT(*) > 1)", (run,)).fetchone()[0]
        bad_vectors = conn.execute(
            "SELECT COUNT(*) FROM documents d WHERE (SELECT COUNT(*) FROM vectors v "
            "WHERE v.kind = 'document' AND v.memory_id = d.id) != 1").fetchone()[0]
        without_stages = conn.execute(
            "SELECT COUNT(*) FROM documents d WHERE NOT EXISTS "
            "(SELECT 1 FROM memory_stages s WHERE s.memory_id = d.id)").fetchone()[0]
        unfinished = conn.execute(
            "SELECT memory_id, stage, status, attempts, lease_owner, last_error FROM memory_stages "
            "WHERE status != 'done' ORDER BY memory_id LIMIT 10").fetchall()
        stages = dict(conn.execute("SELECT status, COUNT(*) FROM memory_stages GROUP BY status"))
    lost = sorted(i for i in acked if i not in texts)
    changed = sorted(i for i, t in acked.items() if i in texts and texts[i] != t)
    return {"documents": len(texts), "lost": lost, "changed": changed,
            "unacknowledged": len(tagged - acked.keys()), "duplicates": duplicates,
            "bad_vectors": bad_vectors, "without_stages": without_stages,
            "unfinished": unfinished, "stages": stages}


def report(tally: Tally, duration: float, kills, stuck_clients: int, found: dict, drained: float | None,
           drain_timeout: float, doctor_exit: int, doctor_text: str, checked: dict,
           extra: list[str] = (), more_failures: list[str] = ()) -> bool:
    """Print the figures (extra: more lines after the kills) and RESULT; True when it passed.
    An integrity state beginning with "skipped" is said, not failed; more_failures fail too."""
    print()
    print(f"calls acknowledged: memorize {tally.answered['memorize']}, recall {tally.answered['recall']} "
          f"({sum(tally.answered.values()) / duration:.0f} calls/s)")
    print(f"calls failed (not acknowledged): {sum(tally.failed.values())}")
    for message, count in tally.failed.most_common():
        print(f"  {count:6d}  {message}")
    print(f"sessions that would not open: {sum(tally.open_failed.values())}")
    for message, count in tally.open_failed.most_common():
        print(f"  {count:6d}  {message}")
    print(f"kills: fronts {kills['front']}, workers {kills['worker']}")
    if tally.restarts:
        print(f"front restart to listening: median {statistics.median(tally.restarts):.1f} s, "
              f"max {max(tally.restarts):.1f} s ({len(tally.restarts)} restarts)")
    for line in extra:
        print(line)
    if stuck_clients:
        print(f"client threads still in a call after the stop: {stuck_clients}")
    lost = len(found["lost"]) + len(found["changed"])
    print(f"lost (acknowledged, then missing or changed): {lost}"
          + (f"  missing ids {found['lost'][:20]} changed ids {found['changed'][:20]}" if lost else ""))
    print(f"ids acknowledged twice: {len(tally.reused_ids)}")
    print(f"committed without acknowledgement (the reply was lost): {found['unacknowledged']}")
    print(f"duplicates (a text stored twice): {found['duplicates']}")
    print(f"memories without exactly one document vector: {found['bad_vectors']} "
          f"of {found['documents']}")
    print(f"stages: {found['stages']}; memories without stage rows: {found['without_stages']}")
    for row in found["unfinished"]:
        print(f"  not done: memory {row[0]} {row[1]} {row[2]} attempts {row[3]} "
              f"lease {row[4]} error {row[5]!r}")
    print("time to drain (1 worker, clean start): "
          + (f"{drained:.1f} s" if drained is not None else f"not drained within {drain_timeout:.0f} s"))
    print(f"doctor exit: {doctor_exit}")
    if doctor_exit != 0:
        print("  " + "\n  ".join(doctor_text.splitlines()[:30]))
    print("integrity: " + ", ".join(f"{name} {state}" for name, state in checked.items()))
    failures = [name for name, bad in (
        ("lost", lost), ("ids acknowledged twice", tally.reused_ids),
        ("duplicates", found["duplicates"]), ("vectors", found["bad_vectors"]),
        ("stages", found["unfinished"] or found["without_stages"] or drained is None),
        ("doctor", doctor_exit != 0),
        ("integrity", not checked or any(state != "ok" and not state.startswith("skipped")
                                         for state in checked.values()))) if bad]
    failures += [f"{name} not done" for name in more_failures]
    print("RESULT: " + ("PASS" if not failures else "FAIL (" + ", ".join(failures) + ")"))
    return not failures
