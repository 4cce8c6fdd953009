"""How long until every memory is searchable by meaning, from the stage rows.

A memory is found by its words (BM25) once memorize commits; it is found by meaning once its
embed stage is done, and a worker embeds every waiting memory before any later stage. So what
a person importing or watching the queue wants to know is: how many memories still wait for
their embed stage, how fast they are being embedded, and so how long until none waits; and
the same for every stage (the panel's queue page shows each).

The pace is the rows of a stage done in a recent window, divided by its length. Five minutes:
long enough to span many embedder batches (a worker embeds a batch at a time, so a few seconds
see either a whole batch or nothing), short enough to follow a change of pace (a worker
started or stopped, a machine that got busy) within minutes. When the live workers started
less than a window ago, the window is the time since the oldest of them started: a fresh
worker's pace is not diluted by minutes in which nothing ran, and what a stopped worker did
before it is not counted for the workers alive now. With no worker alive there is no estimate:
nothing will get done until one starts.

`aokun status` prints `CatchUp.line()`; `aokun status --follow` shows it as a progress bar; the
panel's queue page says the same in its two languages (aokun_panel/words.py). `aokun import`
ends with `catch_up(store, heartbeat_timeout_s).line()`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from shared.pipeline_warnings import format_age
from shared.store.model.stages import EMBED, STAGES

WINDOW_S = 5 * 60
# The shortest window: a worker that started a second ago has a pace made of one batch.
MIN_WINDOW_S = 10.0


@dataclass(frozen=True)
class StagePace:
    """One stage: rows waiting (pending or running), rows done in the last `window_s`."""

    stage: str
    waiting: int
    done: int
    window_s: float

    @property
    def per_s(self) -> float | None:
        """Rows done per second over the window; None while none was done in it."""
        return self.done / self.window_s if self.done else None

    @property
    def eta_s(self) -> float | None:
        """Seconds until none waits at this pace: 0 when none waits, None when the pace is
        not known (nothing done in the window)."""
        if not self.waiting:
            return 0.0
        pace = self.per_s
        return self.waiting / pace if pace else None


@dataclass(frozen=True)
class CatchUp:
    """Every stage's pace, and how many workers are alive to keep it up."""

    stages: tuple[StagePace, ...]
    workers: int

    @property
    def embed(self) -> StagePace:
        return next(p for p in self.stages if p.stage == EMBED)

    def estimate(self) -> str:
        """What is known of the time until none waits for its embed stage: the estimate and
        the pace it is at, or why there is none (nothing waits, no worker, no pace yet)."""
        embed = self.embed
        if not embed.waiting:
            return "none waits"
        if not self.workers:
            return "no worker is running (start one: aokun run, or aokun-worker)"
        window = format_age(embed.window_s)
        if embed.eta_s is None:
            return f"the pace is not known yet (nothing embedded in the last {window})"
        return f"about {format_age(max(1.0, embed.eta_s))} at the pace of the last {window} ({pace(embed.per_s)})"

    def line(self) -> str:
        """One line for people."""
        embed = self.embed
        if not embed.waiting:
            return "every memory is searchable by words; none waits to be searchable by meaning"
        waits = f"{memories(embed.waiting)} {'waits' if embed.waiting == 1 else 'wait'}"
        if not self.workers:
            return f"searchable by words: all; by meaning: {waits} and {self.estimate()}"
        if embed.eta_s is None:
            return f"searchable by words: all; by meaning: {waits}; {self.estimate()}"
        return f"searchable by words: all; by meaning: {waits}, {self.estimate()}"

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON (the panel's queue page)."""
        return {"workers": self.workers,
                "stages": [{"stage": p.stage, "waiting": p.waiting, "done": p.done, "window_s": p.window_s,
                            "per_s": p.per_s, "eta_s": p.eta_s} for p in self.stages]}


def memories(n: int) -> str:
    return f"{n:,} {'memory' if n == 1 else 'memories'}"


def pace(per_s: float | None) -> str:
    """3.4/s; below one a second, 12/min; 0.5/min and slower, 3/h."""
    per_s = per_s or 0.0
    if per_s >= 1:
        return f"{per_s:,.1f}/s" if per_s < 100 else f"{per_s:,.0f}/s"
    if per_s * 60 >= 0.5:
        return f"{per_s * 60:.1f}/min"
    return f"{per_s * 3600:.1f}/h"


def read_catch_up(s, now: float, heartbeat_timeout_s: float, window_s: float = WINDOW_S) -> CatchUp:
    """The catch-up of every stage, from one read session `s` (store.read())."""
    alive = [row for row in s.runtime.worker_rows() if row.alive(now - heartbeat_timeout_s)]
    window = window_s
    if alive:
        window = max(MIN_WINDOW_S, min(window_s, now - min(row.started_time for row in alive)))
    waiting = s.stages.waiting_by_stage()
    # The pace matters only where something waits: no count for a stage that is through.
    return CatchUp(tuple(StagePace(stage, waiting[stage],
                                   s.stages.done_since(stage, now - window) if waiting[stage] else 0, window)
                         for stage in STAGES), len(alive))


def catch_up(store, heartbeat_timeout_s: float, now: float | None = None) -> CatchUp:
    """read_catch_up in a read session of its own, now."""
    with store.read() as s:
        return read_catch_up(s, time.time() if now is None else now, heartbeat_timeout_s)
