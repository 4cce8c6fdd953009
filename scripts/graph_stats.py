#!/usr/bin/env python3
"""Print what the atoms and graph stages made of a store: per-memory averages and atom types.

    .venv/bin/python scripts/graph_stats.py --config bench_out/locomo/config.yaml

A look inside the SQLite file itself (read-only, like scripts/chaos.py's checks): the store's
interface has no call for counts by node or edge type.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.config import load_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    path = load_config(parser.parse_args().config).storage.db_path
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    memories = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] or 1
    counts = {name: conn.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0]
              for name in ("memory_atoms", "graph_nodes", "graph_edges", "graph_entries")}
    print(f"{memories} memories")
    for name, count in counts.items():
        print(f"  {name}: {count} ({count / memories:.2f} per memory)")
    print("  atom types:", dict(conn.execute("SELECT type, COUNT(*) FROM memory_atoms GROUP BY type ORDER BY 2 DESC")))
    print("  atom states:", dict(conn.execute("SELECT state, COUNT(*) FROM memory_atoms GROUP BY state")))
    reinforced = conn.execute("SELECT COUNT(*) FROM memory_atoms WHERE reinforcement_count > 0").fetchone()[0]
    print("  reinforced atoms:", reinforced)
    print("  node types:", dict(conn.execute("SELECT type, COUNT(*) FROM graph_nodes GROUP BY type")))
    print("  edge types:", dict(conn.execute("SELECT type, COUNT(*) FROM graph_edges GROUP BY type")))
    conn.close()


if __name__ == "__main__":
    main()
