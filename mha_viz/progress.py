"""The one way a long computation of the package says how far it is: a callback `progress(fraction, message)`,
the fraction done in [0, 1] and what is being done, in words for the user (the app draws it as a bar,
`mha_viz.ui.jobs`; a script may print it). A corpus run reports documents and their rate instead
(`mha_viz.corpus.engine.Progress`), and the model loader its own stages (`mha_viz_models`)."""

from __future__ import annotations

import time
from typing import Callable

from mha_viz.budget.time_left import TimeLeft, say

Progress = Callable[[float, str], None]  # (fraction done, what is being done)


def report(progress: Progress | None, fraction: float, message: str) -> None:
    """Tell `progress` (None: nobody asked) that `fraction` of the work is done and what is under way."""
    if progress is not None:
        progress(fraction, message)


def with_time_left(progress: Progress, *, clock: Callable[[], float] = time.perf_counter) -> Progress:
    """`progress` told the time left too ("… · about 42 s left"), from the pace of the fraction done since the first
    report (`budget.time_left`: the first step is a warm-up, left out of the pace)."""
    timer = TimeLeft(1.0, clock=clock)

    def told(fraction: float, message: str) -> None:
        fraction = min(max(float(fraction), 0.0), 1.0)
        left = timer.step(max(fraction - timer.done, 0.0))
        progress(fraction, f"{message} · {say(left)}")
    return told
