"""What the FAISS snapshot tests share (tests/test_snapshot.py in the test process,
tests/process/test_snapshot_worker.py with a real worker): memories to embed, settings whose
rankings come from the two FAISS indexes only, a front built in this process that logs what it
says about snapshots beside its config, and readers of that log and of the vector sequence."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

from helpers import db_rows, front_in_process, logging_to
from shared.config import ALL_TOOLS, load_config

TEXTS = [
    "I adopted a small grey cat named Mochi last spring",
    "My sister lives in Lisbon and works as an architect",
    "下周三下午要和同事开项目评审会",
    "Caroline went to an LGBTQ support group meeting on Tuesday",
    "Melanie painted a sunrise over the lake last week",
    "我最喜欢的茶是西湖龙井",
    "The project review moved to Friday because the client was travelling",
    "Jon is training for the Berlin marathon in September",
    "我们计划明年春天去京都看樱花",
    "The dentist said to floss every evening and come back in six months",
    "Grandma's recipe for dumplings uses pork, cabbage and a little ginger",
    "I switched from coffee to green tea because of my sleep",
    # Long enough to be embedded as several passages: its passage vectors are snapshotted too.
    " ".join(f"On day {day} of the hike we walked along the ridge, ate bread and cheese at noon and"
             " counted the birds we saw before the light went." for day in range(1, 15))
    + " On the last evening the ranger told us the old lighthouse keeper had kept bees on the cliff.",
]
# The vector channels only, so every ranking comes from the two FAISS indexes; no
# reinforcement, so recalling changes nothing that a later recall reads.
SETTINGS = {"retrieval": {"channels": ["vector", "graph_vector"], "access_reinforcement": False},
            "server": {"exposed_tools": list(ALL_TOOLS)}}
WITH_INFO = {**SETTINGS, "server": {**SETTINGS["server"], "log_level": "INFO"}}


def data_dir(config: Path) -> Path:
    return config.parent / "data"


@contextmanager
def front(config: Path):
    """A new front on the config, built in this process; its log (at server.log_level, as the
    process writes it to stderr) goes to front.log beside the config."""
    with open(config.parent / "front.log", "w") as log, logging_to(log, load_config(config).server.log_level):
        with front_in_process(config) as session:
            yield session


def front_log(config: Path) -> list[str]:
    return (config.parent / "front.log").read_text().splitlines()


def snapshot_lines(config: Path) -> list[str]:
    return [line for line in front_log(config) if "snapshot" in line]


def loaded_from_snapshot(config: Path) -> dict[str, tuple[int, int]]:
    """{kind: (changes applied, vectors in the index)} from the front's log lines."""
    found = {}
    for line in snapshot_lines(config):
        if match := re.search(r"(\w+) vectors: loaded snapshot .* applied (\d+) changes since: (\d+) vectors", line):
            found[match[1]] = (int(match[2]), int(match[3]))
    return found


def vector_seq(config: Path) -> int:
    return int(db_rows(config, "SELECT value FROM meta WHERE key = 'vector_seq'")[0][0])
