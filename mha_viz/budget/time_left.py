"""How long a running job has left (`TimeLeft`), from the pace of the work done so far, and how a
progress message says it (`say`).

The pace is the work done since the first step divided by the time since it: the first step holds
the warm-up (a model's first call, its buffers, compiled loops), which would make the pace too slow,
and its work (the shortest documents of a corpus, sorted first) can be far from the rest's. So nothing
is estimated until a step after the first is done ("estimating the time left…"), and work is counted
in units that cost about the same (a scan's layers; a corpus's characters, not its documents).
"""

from __future__ import annotations

import math
import time
from typing import Callable

ESTIMATING = "estimating the time left…"
FINISHING = "finishing…"


class TimeLeft:
    """Seconds left of a job of `total` units of work. `step(work)` after each piece is done returns
    the estimate then (None while there is no pace yet). `warm_up`: the first steps left out of the
    pace (0: the pace counts from the job's start, when the object is made)."""

    def __init__(self, total: float, *, warm_up: int = 1, clock: Callable[[], float] = time.perf_counter) -> None:
        self.total, self.warm_up, self.clock = float(total), int(warm_up), clock
        self.done, self.steps = 0.0, 0
        # (time, work done) where the pace starts counting
        self.mark: tuple[float, float] | None = (clock(), 0.0) if warm_up <= 0 else None

    def step(self, work: float = 1.0) -> float | None:
        """`work` more units done now; the seconds left (None: not known yet)."""
        self.done += float(work)
        self.steps += 1
        now = self.clock()
        if self.steps == self.warm_up:
            self.mark = (now, self.done)
            return None if self.done < self.total else 0.0
        return self.seconds(now)

    def seconds(self, now: float | None = None) -> float | None:
        """The seconds left at `now` (default the clock's), from the pace since the mark; None while no
        work has been timed past the warm-up; 0 once everything is done."""
        if self.done >= self.total:
            return 0.0
        if self.mark is None:
            return None
        now = self.clock() if now is None else now
        elapsed, work = now - self.mark[0], self.done - self.mark[1]
        if elapsed <= 0 or work <= 0:
            return None
        return (self.total - self.done) * elapsed / work


def say(seconds: float | None) -> str:
    """The time left as a progress message says it: "about 42 s left", "about 6 min left", "estimating
    the time left…" (None, NaN or infinity: not known yet), "finishing…" (nothing left to time)."""
    if seconds is None or not math.isfinite(seconds):
        return ESTIMATING
    if seconds < 0.5:
        return FINISHING
    if seconds < 180:
        return f"about {max(1, round(seconds))} s left"
    return f"about {round(seconds / 60)} min left"
